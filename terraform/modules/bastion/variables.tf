variable "cluster" {
  type        = any
  description = "What every server of the cluster shares (name prefix, tags, image, external network, cloud-init settings), handed to modules/server, whose variable of the same name types and describes it."
}

variable "networks" {
  type        = any
  description = "The private and public networks and subnets, handed to modules/server, whose variable of the same name types and describes them."
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

variable "root_password_hash" {
  type        = string
  description = "Hash of root's console password, or null to leave root without one."
  default     = null
  sensitive   = true
}
