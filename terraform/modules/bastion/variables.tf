variable "name_prefix" {
  type        = string
  description = "Prefix of every resource name (the cluster name)."
}

variable "tags" {
  type        = list(string)
  description = "Tags put on every resource that takes them."
  default     = []
}

variable "image_name" {
  type        = string
  description = "Image the bastion boots from."
}

variable "flavor_name" {
  type        = string
  description = "Flavor of the bastion."
}

variable "availability_zone" {
  type        = string
  description = "Compute availability zone; null lets Nova choose."
  default     = null
}

variable "external_network_name" {
  type        = string
  description = "External network the floating IP comes from."
}

variable "public_network_id" {
  type        = string
  description = "ID of the public network."
}

variable "public_subnet_id" {
  type        = string
  description = "ID of the public subnet."
}

variable "private_network_id" {
  type        = string
  description = "ID of the private network."
}

variable "private_subnet_id" {
  type        = string
  description = "ID of the private subnet."
}

variable "public_ip" {
  type        = string
  description = "Fixed address of the bastion on the public network."
}

variable "private_ip" {
  type        = string
  description = "Fixed address of the bastion on the private network: the private network's gateway."
}

variable "private_cidr" {
  type        = string
  description = "CIDR of the private network the bastion NATs and forwards for."
}

variable "pod_cidr" {
  type        = string
  description = "CIDR of the pods, whose traffic the bastion may also forward."
}

variable "ssh_allowed_cidrs" {
  type        = list(string)
  description = "CIDRs allowed to reach SSH on the bastion's public port."
}

variable "cloud_init" {
  type        = any
  description = "Settings shared by every VM's cloud-init, handed to modules/server, whose variable of the same name types and describes them."
}

variable "root_password_hash" {
  type        = string
  description = "Hash of root's console password, or null to leave root without one."
  default     = null
  sensitive   = true
}
