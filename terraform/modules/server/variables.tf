variable "cluster" {
  type = object({
    name_prefix           = string
    tags                  = optional(list(string), [])
    image_name            = string
    external_network_name = optional(string)
    cloud_init = object({
      domain                = string
      salt_master_ip        = string
      salt_transport        = string
      deploy_user           = string
      ssh_public_keys       = list(string)
      salt_version          = string
      salt_bootstrap_url    = string
      salt_bootstrap_sha256 = optional(string)
      hosts                 = map(string)
    })
  })
  description = <<-EOT
    What every server of the cluster shares: name_prefix (of every resource name: the cluster
    name), tags (on every resource that takes them), image_name (the image the servers boot
    from), external_network_name (whose pool gives the floating IPs; null when no server has one)
    and cloud_init, the settings shared by every VM's cloud-init: domain, Salt master address
    and transport, deploy user and keys, Salt installation, /etc/hosts entries (hostname =>
    IP; each server adds its own).
  EOT

  validation {
    condition     = contains(["zeromq", "tcp"], var.cluster.cloud_init.salt_transport)
    error_message = "cloud_init.salt_transport must be zeromq or tcp."
  }
}

variable "networks" {
  type = object({
    private = object({
      network_id = string
      subnet_id  = string
    })
    public = optional(object({
      network_id = string
      subnet_id  = string
    }))
  })
  description = "The private network and subnet every server has a port on, and the public ones for servers with a public port (null when none has one)."
}

variable "flavor_name" {
  type        = string
  description = "Flavor of the servers that name none of their own."
  default     = null
}

variable "admin_network_id" {
  type        = string
  description = "ID of the existing admin network, for servers with an admin port; null when none has one."
  default     = null
}

variable "servers" {
  type = map(object({
    role              = string
    template          = string
    availability_zone = optional(string)
    flavor_name       = optional(string)
    boot_volume = optional(object({
      size = number
      type = optional(string)
    }))
    server_group_id = optional(string)
    private = object({
      ip                    = string
      security_group_ids    = list(string)
      allowed_address_pairs = optional(list(string), [])
      interface_mode        = optional(string)
    })
    public = optional(object({
      ip                    = string
      security_group_ids    = list(string)
      allowed_address_pairs = optional(list(string), [])
      interface_mode        = optional(string)
      floating_ip           = optional(bool, false)
    }))
    admin = optional(object({
      security_group_ids    = list(string)
      allowed_address_pairs = optional(list(string), [])
      interface_mode        = optional(string)
    }))
    port_order = optional(list(string), ["private", "public", "admin"])
    volume = optional(object({
      id = string
    }))
  }))
  description = <<-EOT
    Servers by hostname (minion id <hostname>.<cluster.cloud_init.domain>):
    role (the kos_role metadata and the first boot's role), template (a cloud-config in
    terraform/cloud-init/, without .tftpl; its extra variables come from template_vars),
    availability zone, flavor (default flavor_name), boot_volume (the root disk as a Cinder
    volume of size GiB and type made from the image, deleted with the server; null: the
    flavor's disk), the server group it is created in,
    and the ports: private (always), public (optionally with a floating IP) and admin (an
    address from the admin network's DHCP), each with its security groups, allowed address
    pairs and interface_mode, how the first boot configures it (kos-firstboot.sh.tftpl:
    default, no-routes or own-table; null leaves it to cloud-init). port_order is the order
    the server is plugged into its ports; volume a Cinder volume to attach (an object, so
    that whether there is one is known before the volume exists), whose serial the first
    boot mounts.
  EOT

  validation {
    condition     = alltrue([for host in keys(var.servers) : can(regex("^[a-z0-9]([a-z0-9-]*[a-z0-9])?$", host))])
    error_message = "Every server's hostname must be a DNS label (lower-case letters, digits and inner hyphens)."
  }

  validation {
    condition     = alltrue([for server in values(var.servers) : contains(["bastion", "salt_master", "control_plane", "worker"], server.role)])
    error_message = "Every server's role must be bastion, salt_master, control_plane or worker."
  }

  validation {
    condition     = alltrue([for server in values(var.servers) : contains(["bastion", "salt-master", "minion"], server.template)])
    error_message = "Every server's template must be bastion, salt-master or minion (the cloud-configs in terraform/cloud-init/)."
  }

  validation {
    condition = alltrue(flatten([
      for server in values(var.servers) : [
        for port in [server.private, server.public, server.admin] :
        port == null ? true : port.interface_mode == null ? true : contains(["default", "no-routes", "own-table"], port.interface_mode)
      ]
    ]))
    error_message = "A port's interface_mode must be default, no-routes, own-table or null."
  }

  validation {
    condition = alltrue([
      for server in values(var.servers) :
      length(server.port_order) == length(distinct(server.port_order)) && length(setsubtract(server.port_order, ["private", "public", "admin"])) == 0 && contains(server.port_order, "private")
    ])
    error_message = "A server's port_order lists private, and optionally public and admin, each once."
  }
}

variable "template_vars" {
  type        = map(map(string))
  description = "Extra variables of each server's template, by hostname (the bastion's private_cidr, the master's pillar). Apart from servers because they may be made of what this module creates: the master's pillar names its own floating IP."
  default     = {}
}

variable "root_password_hash" {
  type        = string
  description = "Hash of root's console password, or null to leave root without one."
  default     = null
  sensitive   = true
}
