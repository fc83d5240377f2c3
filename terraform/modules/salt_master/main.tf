# Salt master on the private network, with a persistent volume for its keys and cache. A top
# master (master of masters) also has a port on the public network with a floating IP, where
# the other environments' masters join it as syndics.

locals {
  # Fixed: the root names the master's minion id, and the moved blocks below its instances.
  hostname = "salt"
}

resource "openstack_networking_secgroup_v2" "this" {
  name        = "${var.cluster.name_prefix}-salt-master"
  description = "kos Salt master: Salt from the private network, SSH from the bastion"
  tags        = var.cluster.tags
}

# The check of a top master's inputs, on a resource of its own: a precondition reads the
# public network's ids, and on any resource that builds the cluster it would hold that
# resource back until the network exists.
resource "terraform_data" "top_master_inputs" {
  count = var.top_master ? 1 : 0

  lifecycle {
    precondition {
      condition     = var.networks.public != null && var.cluster.external_network_name != null && var.public_ip != null && length(var.syndic_cidrs) > 0
      error_message = "A top master needs the public network, the cluster's external_network_name, public_ip and at least one syndic CIDR."
    }
  }
}

resource "openstack_networking_secgroup_rule_v2" "salt" {
  security_group_id = openstack_networking_secgroup_v2.this.id
  description       = "Salt publisher and request server (4505-4506) from the private network"
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  port_range_min    = 4505
  port_range_max    = 4506
  remote_ip_prefix  = var.private_cidr
}

resource "openstack_networking_secgroup_rule_v2" "ssh" {
  security_group_id = openstack_networking_secgroup_v2.this.id
  description       = "SSH from the bastion only"
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  port_range_min    = 22
  port_range_max    = 22
  remote_ip_prefix  = "${var.bastion_private_ip}/32"
}

resource "openstack_networking_secgroup_rule_v2" "icmp" {
  security_group_id = openstack_networking_secgroup_v2.this.id
  description       = "ICMP from the private network"
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "icmp"
  remote_ip_prefix  = var.private_cidr
}

# Only on a top master: the syndics' masters reach it from outside, on its floating IP.
resource "openstack_networking_secgroup_rule_v2" "syndics" {
  for_each = var.top_master ? toset(var.syndic_cidrs) : toset([])

  security_group_id = openstack_networking_secgroup_v2.this.id
  description       = "Salt publisher and request server (4505-4506) from syndics at ${each.key}"
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  port_range_min    = 4505
  port_range_max    = 4506
  remote_ip_prefix  = each.key
}

resource "openstack_blockstorage_volume_v3" "state" {
  name              = "${var.cluster.name_prefix}-${local.hostname}-state"
  description       = "kos Salt master state (/etc/salt/pki, /var/cache/salt): keep it to keep the minions' trust"
  size              = var.volume_size
  volume_type       = var.volume_type
  availability_zone = var.availability_zone

  metadata = {
    kos_cluster = var.cluster.name_prefix
    kos_role    = "salt_master"
  }
}

module "server" {
  source = "../server"

  cluster            = var.cluster
  networks           = var.networks
  flavor_name        = var.flavor_name
  root_password_hash = var.root_password_hash
  template_vars      = { (local.hostname) = { pillar = var.pillar } }

  servers = {
    (local.hostname) = {
      role              = "salt_master"
      template          = "salt-master"
      availability_zone = var.availability_zone
      volume            = { id = openstack_blockstorage_volume_v3.state.id }
      # A floating IP answers through the public side, so that side carries the default
      # route (as for a node with a floating IP); the minions stay on the private side.
      private = {
        ip                 = var.private_ip
        security_group_ids = [openstack_networking_secgroup_v2.this.id]
        interface_mode     = var.top_master ? "no-routes" : null
      }
      public = var.top_master ? {
        ip                 = var.public_ip
        security_group_ids = [openstack_networking_secgroup_v2.this.id]
        interface_mode     = "default"
        floating_ip        = true
      } : null
    }
  }
}

# Where the resources of the master's server lived before modules/server
# (https://developer.hashicorp.com/terraform/language/moved): an existing master is moved,
# not rebuilt.
moved {
  from = openstack_networking_port_v2.private
  to   = module.server.openstack_networking_port_v2.private["salt"]
}

moved {
  from = openstack_networking_port_v2.public[0]
  to   = module.server.openstack_networking_port_v2.public["salt"]
}

moved {
  from = openstack_compute_instance_v2.this
  to   = module.server.openstack_compute_instance_v2.this["salt"]
}

moved {
  from = openstack_networking_floatingip_v2.this[0]
  to   = module.server.openstack_networking_floatingip_v2.this["salt"]
}

moved {
  from = openstack_networking_floatingip_associate_v2.this[0]
  to   = module.server.openstack_networking_floatingip_associate_v2.this["salt"]
}

moved {
  from = openstack_compute_volume_attach_v2.state
  to   = module.server.openstack_compute_volume_attach_v2.this["salt"]
}
