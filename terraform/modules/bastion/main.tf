# SSH entry point and NAT gateway of the private network: one port on each network.

locals {
  fqdn = "${var.hostname}.${var.cloud_init.domain}"

  firstboot = templatefile("${path.module}/../../cloud-init/kos-firstboot.sh.tftpl", {
    fqdn                  = local.fqdn
    role                  = "bastion"
    salt_master_ip        = var.cloud_init.salt_master_ip
    salt_version          = var.cloud_init.salt_version
    salt_bootstrap_url    = var.cloud_init.salt_bootstrap_url
    salt_bootstrap_sha256 = var.cloud_init.salt_bootstrap_sha256
    volume_serial         = null
    interfaces = [
      { mac = openstack_networking_port_v2.public.mac_address, mode = "default", ip = var.public_ip },
      # DHCP would offer the bastion its own address as gateway.
      { mac = openstack_networking_port_v2.private.mac_address, mode = "no-routes", ip = var.private_ip },
    ]
  })

  user_data = templatefile("${path.module}/../../cloud-init/bastion.tftpl", {
    hostname           = var.hostname
    fqdn               = local.fqdn
    domain             = var.cloud_init.domain
    deploy_user        = var.cloud_init.deploy_user
    ssh_public_keys    = var.cloud_init.ssh_public_keys
    salt_master_ip     = var.cloud_init.salt_master_ip
    salt_transport     = var.cloud_init.salt_transport
    hosts              = merge(var.cloud_init.hosts, { (var.hostname) = var.private_ip })
    root_password_hash = var.root_password_hash
    private_cidr       = var.private_cidr
    firstboot          = local.firstboot
  })
}

resource "openstack_networking_secgroup_v2" "public" {
  name        = "${var.name_prefix}-bastion-public"
  description = "kos bastion, public side: SSH from the allowed CIDRs"
  tags        = var.tags
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
  name        = "${var.name_prefix}-bastion-private"
  description = "kos bastion, private side: everything from the private network, which it forwards and NATs"
  tags        = var.tags
}

resource "openstack_networking_secgroup_rule_v2" "private_any" {
  for_each = { private = var.private_cidr, pods = var.pod_cidr }

  security_group_id = openstack_networking_secgroup_v2.private.id
  description       = "any traffic from the ${each.key} range (forwarded to the outside)"
  direction         = "ingress"
  ethertype         = "IPv4"
  remote_ip_prefix  = each.value
}

resource "openstack_networking_port_v2" "public" {
  name               = "${var.name_prefix}-${var.hostname}-public"
  network_id         = var.public_network_id
  admin_state_up     = true
  security_group_ids = [openstack_networking_secgroup_v2.public.id]
  tags               = var.tags

  fixed_ip {
    subnet_id  = var.public_subnet_id
    ip_address = var.public_ip
  }
}

resource "openstack_networking_port_v2" "private" {
  name               = "${var.name_prefix}-${var.hostname}-private"
  network_id         = var.private_network_id
  admin_state_up     = true
  security_group_ids = [openstack_networking_secgroup_v2.private.id]
  tags               = var.tags

  fixed_ip {
    subnet_id  = var.private_subnet_id
    ip_address = var.private_ip
  }

  # Replies to NATed traffic leave this port with outside source addresses; port security
  # drops them unless the port may send from any address.
  allowed_address_pairs {
    ip_address = "0.0.0.0/0"
  }
}

resource "openstack_compute_instance_v2" "this" {
  name              = "${var.name_prefix}-${var.hostname}"
  image_name        = var.image_name
  flavor_name       = var.flavor_name
  availability_zone = var.availability_zone
  # User data from the config drive: the private network has no router for the metadata service.
  config_drive = true
  user_data    = local.user_data
  tags         = var.tags

  metadata = {
    kos_cluster   = var.name_prefix
    kos_role      = "bastion"
    kos_minion_id = local.fqdn
  }

  network {
    port = openstack_networking_port_v2.public.id
  }

  network {
    port = openstack_networking_port_v2.private.id
  }

  lifecycle {
    # cloud-init reads user data at first boot only; later changes would only force a rebuild.
    ignore_changes = [user_data]
  }
}

resource "openstack_networking_floatingip_v2" "this" {
  pool        = var.external_network_name
  description = "kos ${var.name_prefix} ${local.fqdn}"
  tags        = var.tags
}

resource "openstack_networking_floatingip_associate_v2" "this" {
  floating_ip = openstack_networking_floatingip_v2.this.address
  port_id     = openstack_networking_port_v2.public.id
}
