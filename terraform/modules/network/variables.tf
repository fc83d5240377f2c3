variable "name_prefix" {
  type        = string
  description = "Prefix of every resource name (the cluster name)."
}

variable "tags" {
  type        = list(string)
  description = "Tags put on every resource that takes them."
  default     = []
}

variable "external_network_name" {
  type        = string
  description = "Name of the existing external network the router's gateway is on."
}

variable "public_cidr" {
  type        = string
  description = "IPv4 CIDR of the public-facing network."
}

variable "private_cidr" {
  type        = string
  description = "IPv4 CIDR of the private network."
}

variable "private_gateway_ip" {
  type        = string
  description = "Gateway DHCP announces on the private network: the bastion's private address, since the bastion NATs it."
}

variable "route_public_via_router" {
  type        = bool
  description = "Give the router a port on the private subnet and announce the public subnet through it, so the private hosts reach the public subnet (the API load balancer's VIP) without the bastion."
  default     = false
}

variable "router_private_ip" {
  type        = string
  description = "The router's address on the private subnet, when route_public_via_router."
  default     = null
}

variable "dns_nameservers" {
  type        = list(string)
  description = "Resolvers announced by DHCP on both subnets; empty keeps the cloud's default."
  default     = []
}
