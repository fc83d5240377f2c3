# Salt master on the private network, with a persistent volume for its keys and cache. A top
# master (master of masters) also has a port on the public network with a floating IP, where
# the other environments' masters join it as syndics.

locals {
  fqdn = "${var.hostname}.${var.cloud_init.domain}"

  # A floating IP answers through the public side, so that side carries the default route
  # (as for a node with a floating IP); the minions stay on the private side.
  interfaces = var.top_master ? [
    { mac = openstack_networking_port_v2.public[0].mac_address, mode = "default", ip = var.public_ip },
    { mac = openstack_networking_port_v2.private.mac_address, mode = "no-routes", ip = var.private_ip },
  ] : []

  firstboot = templatefile("${path.module}/../../cloud-init/kos-firstboot.sh.tftpl", {
    fqdn                  = local.fqdn
    role                  = "salt_master"
    salt_master_ip        = var.cloud_init.salt_master_ip
    salt_version          = var.cloud_init.salt_version
    salt_bootstrap_url    = var.cloud_init.salt_bootstrap_url
    salt_bootstrap_sha256 = var.cloud_init.salt_bootstrap_sha256
    interfaces            = local.interfaces
    # virtio-blk exposes the first 20 characters of the volume id as the disk serial.
    volume_serial = substr(openstack_blockstorage_volume_v3.state.id, 0, 20)
  })

  user_data = templatefile("${path.module}/../../cloud-init/salt-master.tftpl", {
    hostname           = var.hostname
    fqdn               = local.fqdn
    domain             = var.cloud_init.domain
    deploy_user        = var.cloud_init.deploy_user
    ssh_public_keys    = var.cloud_init.ssh_public_keys
    salt_master_ip     = var.cloud_init.salt_master_ip
    salt_transport     = var.cloud_init.salt_transport
    hosts              = merge(var.cloud_init.hosts, { (var.hostname) = var.private_ip })
    root_password_hash = var.root_password_hash
    pillar             = var.pillar
    firstboot          = local.firstboot
  })
}

resource "openstack_networking_secgroup_v2" "this" {
  name        = "${var.name_prefix}-salt-master"
  description = "kos Salt master: Salt from the private network, SSH from the bastion"
  tags        = var.tags
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

resource "openstack_networking_port_v2" "private" {
  name               = "${var.name_prefix}-${var.hostname}-private"
  network_id         = var.private_network_id
  admin_state_up     = true
  security_group_ids = [openstack_networking_secgroup_v2.this.id]
  tags               = var.tags

  fixed_ip {
    subnet_id  = var.private_subnet_id
    ip_address = var.private_ip
  }
}

resource "openstack_networking_port_v2" "public" {
  count = var.top_master ? 1 : 0

  name               = "${var.name_prefix}-${var.hostname}-public"
  network_id         = var.public_network_id
  admin_state_up     = true
  security_group_ids = [openstack_networking_secgroup_v2.this.id]
  tags               = var.tags

  fixed_ip {
    subnet_id  = var.public_subnet_id
    ip_address = var.public_ip
  }

  lifecycle {
    precondition {
      condition     = var.public_network_id != null && var.public_subnet_id != null && var.public_ip != null && var.external_network_name != null && length(var.syndic_cidrs) > 0
      error_message = "A top master needs public_network_id, public_subnet_id, public_ip, external_network_name and at least one syndic CIDR."
    }
  }
}

resource "openstack_networking_floatingip_v2" "this" {
  count = var.top_master ? 1 : 0

  pool        = var.external_network_name
  description = "kos ${var.name_prefix} ${local.fqdn}"
  tags        = var.tags
}

resource "openstack_networking_floatingip_associate_v2" "this" {
  count = var.top_master ? 1 : 0

  floating_ip = openstack_networking_floatingip_v2.this[0].address
  port_id     = openstack_networking_port_v2.public[0].id
}

resource "openstack_blockstorage_volume_v3" "state" {
  name              = "${var.name_prefix}-${var.hostname}-state"
  description       = "kos Salt master state (/etc/salt/pki, /var/cache/salt): keep it to keep the minions' trust"
  size              = var.volume_size
  volume_type       = var.volume_type
  availability_zone = var.availability_zone

  metadata = {
    kos_cluster = var.name_prefix
    kos_role    = "salt_master"
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
    kos_role      = "salt_master"
    kos_minion_id = local.fqdn
  }

  network {
    port = openstack_networking_port_v2.private.id
  }

  dynamic "network" {
    for_each = openstack_networking_port_v2.public
    content {
      port = network.value.id
    }
  }

  lifecycle {
    # The pillar in the user data changes with every node added; re-creating the master for
    # that is pointless (cloud-init reads it once), the bootstrapper pushes salt_pillar instead.
    ignore_changes = [user_data]
  }
}

resource "openstack_compute_volume_attach_v2" "state" {
  instance_id = openstack_compute_instance_v2.this.id
  volume_id   = openstack_blockstorage_volume_v3.state.id
}
