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
  description = "Flavor of the master."
}

variable "availability_zone" {
  type        = string
  description = "Availability zone of the server and its volume; null lets the cloud choose."
  default     = null
}

variable "volume_size" {
  type        = number
  description = "Size in GiB of the persistent state volume (/etc/salt/pki, /var/cache/salt)."
  default     = 10

  validation {
    condition     = var.volume_size >= 1
    error_message = "volume_size must be at least 1 GiB."
  }
}

variable "volume_type" {
  type        = string
  description = "Cinder volume type of the state volume; null takes the default."
  default     = null
}

variable "private_ip" {
  type        = string
  description = "Fixed address of the master; every minion's cloud-init points at it before the master exists."
}

variable "private_cidr" {
  type        = string
  description = "CIDR of the private network, where the minions connect from."
}

variable "bastion_private_ip" {
  type        = string
  description = "Private address of the bastion, the only SSH source allowed."
}

variable "top_master" {
  type        = bool
  description = "Whether this master is a top master (master of masters): a port on the public network with a floating IP, and the Salt ports open from syndic_cidrs."
  default     = false
}

variable "public_ip" {
  type        = string
  description = "Fixed address of a top master on the public network; unused otherwise."
  default     = null
}

variable "syndic_cidrs" {
  type        = list(string)
  description = "IPv4 CIDRs the syndic environments' masters reach a top master from; each gets the Salt ports 4505-4506."
  default     = []
}

variable "pillar" {
  type        = string
  description = "YAML written to /srv/pillar/_from_terraform.sls at first boot."
}

variable "root_password_hash" {
  type        = string
  description = "Hash of root's console password, or null to leave root without one."
  default     = null
  sensitive   = true
}
