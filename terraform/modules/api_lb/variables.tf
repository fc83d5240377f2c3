variable "name_prefix" {
  type        = string
  description = "Prefix of the load balancer's resource names (the cluster's name)."
}

variable "tags" {
  type        = list(string)
  description = "Tags of the load balancer and its floating IP."
}

variable "provider_name" {
  type        = string
  description = "Octavia provider (amphora, ovn, ...); null: the cloud's default."
  default     = null
}

variable "vip_subnet_id" {
  type        = string
  description = "The VIP's subnet: the public one, on the router (see the root's api_vip_ip)."
}

variable "member_subnet_id" {
  type        = string
  description = "The control planes' subnet: the private one."
}

variable "vip_address" {
  type        = string
  description = "The VIP's fixed address, named in the pillar before anything boots."
}

variable "port" {
  type        = number
  description = "The API port, on the VIP and on every control plane."
}

variable "members" {
  type        = map(string)
  description = "The control planes: private address by hostname."
}

variable "allowed_cidrs" {
  type        = list(string)
  description = "Sources the listener accepts; the private network must be among them."
}

variable "external_network_name" {
  type        = string
  description = "The external network the floating IP comes from."
}
