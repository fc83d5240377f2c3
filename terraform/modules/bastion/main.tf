# SSH entry point and NAT gateway of the private network: one port on each network.

locals {
  # Fixed: the root names the bastion's minion id, and the moved blocks below its instances.
  hostname = "bastion"
}

resource "openstack_networking_secgroup_v2" "public" {
  name        = "${var.cluster.name_prefix}-bastion-public"
  description = "kos bastion, public side: SSH from the allowed CIDRs"
  tags        = var.cluster.tags
}

resource "openstack_networking_secgroup_rule_v2" "public_ssh" {
  for_each = toset(var.ssh_allowed_cidrs)

  security_group_id = openstack_networking_secgroup_v2.public.id
  description       = "SSH from ${each.value}"
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  port_range_min    = 22
  port_range_max    = 22
  remote_ip_prefix  = each.value
}

resource "openstack_networking_secgroup_rule_v2" "public_icmp" {
  for_each = toset(var.ssh_allowed_cidrs)

  security_group_id = openstack_networking_secgroup_v2.public.id
  description       = "ICMP from ${each.value}"
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "icmp"
  remote_ip_prefix  = each.value
}

resource "openstack_networking_secgroup_v2" "private" {
  name        = "${var.cluster.name_prefix}-bastion-private"
  description = "kos bastion, private side: everything from the private network, which it forwards and NATs"
  tags        = var.cluster.tags
}

resource "openstack_networking_secgroup_rule_v2" "private_any" {
  for_each = { private = var.private_cidr, pods = var.pod_cidr }

  security_group_id = openstack_networking_secgroup_v2.private.id
  description       = "any traffic from the ${each.key} range (forwarded to the outside)"
  direction         = "ingress"
  ethertype         = "IPv4"
  remote_ip_prefix  = each.value
}

module "server" {
  source = "../server"

  cluster            = var.cluster
  networks           = var.networks
  flavor_name        = var.flavor_name
  root_password_hash = var.root_password_hash
  template_vars      = { (local.hostname) = { private_cidr = var.private_cidr } }

  servers = {
    (local.hostname) = {
      role              = "bastion"
      template          = "bastion"
      availability_zone = var.availability_zone
      # The public side first: it carries the default route.
      port_order = ["public", "private"]
      public = {
        ip                 = var.public_ip
        security_group_ids = [openstack_networking_secgroup_v2.public.id]
        interface_mode     = "default"
        floating_ip        = true
      }
      private = {
        ip                 = var.private_ip
        security_group_ids = [openstack_networking_secgroup_v2.private.id]
        # DHCP would offer the bastion its own address as gateway.
        interface_mode = "no-routes"
        # Replies to NATed traffic leave this port with outside source addresses; port
        # security drops them unless the port may send from any address.
        allowed_address_pairs = ["0.0.0.0/0"]
      }
    }
  }
}

# Where the resources of the bastion's server lived before modules/server
# (https://developer.hashicorp.com/terraform/language/moved): an existing bastion is moved,
# not rebuilt.
moved {
  from = openstack_networking_port_v2.public
  to   = module.server.openstack_networking_port_v2.public["bastion"]
}

moved {
  from = openstack_networking_port_v2.private
  to   = module.server.openstack_networking_port_v2.private["bastion"]
}

moved {
  from = openstack_compute_instance_v2.this
  to   = module.server.openstack_compute_instance_v2.this["bastion"]
}

moved {
  from = openstack_networking_floatingip_v2.this
  to   = module.server.openstack_networking_floatingip_v2.this["bastion"]
}

moved {
  from = openstack_networking_floatingip_associate_v2.this
  to   = module.server.openstack_networking_floatingip_associate_v2.this["bastion"]
}
