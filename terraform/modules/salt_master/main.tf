# Salt master on the private network only, with a persistent volume for its keys and cache.

locals {
  fqdn = "${var.hostname}.${var.cloud_init.domain}"

  firstboot = templatefile("${path.module}/../../cloud-init/kos-firstboot.sh.tftpl", {
    fqdn                  = local.fqdn
    role                  = "salt_master"
    salt_master_ip        = var.cloud_init.salt_master_ip
    salt_version          = var.cloud_init.salt_version
    salt_bootstrap_url    = var.cloud_init.salt_bootstrap_url
    salt_bootstrap_sha256 = var.cloud_init.salt_bootstrap_sha256
    interfaces            = []
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
