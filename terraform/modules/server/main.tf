# Servers keyed by hostname, the same for every role: the ports (private, and optionally public
# and admin) with their security groups, the server on them, its cloud-init user data, and
# optionally a floating IP on the public port and a volume attached. What differs by role
# (security group rules, addresses, which ports) comes from the caller.
#
# Every resource here is keyed by hostname and has one resource per port side, so that the
# callers' `moved` blocks can move the resources they used to declare themselves without
# renaming a single instance (a moved block keeps the instance keys of a whole resource:
# https://developer.hashicorp.com/terraform/language/modules/develop/refactoring).

locals {
  fqdn = { for host, server in var.servers : host => "${host}.${var.cluster.cloud_init.domain}" }

  public_servers   = { for host, server in var.servers : host => server if server.public != null }
  admin_servers    = { for host, server in var.servers : host => server if server.admin != null }
  floating_servers = { for host, server in local.public_servers : host => server if server.public.floating_ip }

  # The interfaces the first boot configures, default route first (then the address-only
  # side, then the one with its own routing table), whatever order the server is plugged in.
  interface_modes = ["default", "no-routes", "own-table"]
  interfaces = {
    for host, server in var.servers : host => flatten([
      for mode in local.interface_modes : concat(
        server.public != null && try(server.public.interface_mode, null) == mode ? [
          { mac = openstack_networking_port_v2.public[host].mac_address, mode = mode, ip = server.public.ip },
        ] : [],
        server.private.interface_mode == mode ? [
          { mac = openstack_networking_port_v2.private[host].mac_address, mode = mode, ip = server.private.ip },
        ] : [],
        server.admin != null && try(server.admin.interface_mode, null) == mode ? [
          { mac = openstack_networking_port_v2.admin[host].mac_address, mode = mode, ip = openstack_networking_port_v2.admin[host].all_fixed_ips[0] },
        ] : [],
      )
    ])
  }

  ports = {
    for host, server in var.servers : host => merge(
      { private = openstack_networking_port_v2.private[host] },
      { for port in try([openstack_networking_port_v2.public[host]], []) : "public" => port },
      { for port in try([openstack_networking_port_v2.admin[host]], []) : "admin" => port },
    )
  }

  user_data = {
    for host, server in var.servers : host => templatefile("${path.module}/../../cloud-init/${server.template}.tftpl", merge(lookup(var.template_vars, host, {}), {
      hostname        = host
      fqdn            = local.fqdn[host]
      domain          = var.cluster.cloud_init.domain
      deploy_user     = var.cluster.cloud_init.deploy_user
      ssh_public_keys = var.cluster.cloud_init.ssh_public_keys
      salt_master_ip  = var.cluster.cloud_init.salt_master_ip
      salt_transport  = var.cluster.cloud_init.salt_transport
      # rejected_retry: a rebuilt server's new key is denied until kos forgets the old one;
      # the minion keeps asking instead of exiting. acceptance_wait_time: how long a minion
      # whose key is pending waits before it asks again (Salt's default is 10 s), so it
      # answers within seconds of kos accepting its key.
      minion_conf = yamlencode({
        id                   = local.fqdn[host]
        master               = var.cluster.cloud_init.salt_master_ip
        rejected_retry       = true
        transport            = var.cluster.cloud_init.salt_transport
        acceptance_wait_time = 2
      })
      hosts              = merge(var.cluster.cloud_init.hosts, { (host) = server.private.ip })
      root_password_hash = var.root_password_hash
      firstboot = templatefile("${path.module}/../../cloud-init/kos-firstboot.sh.tftpl", {
        fqdn                  = local.fqdn[host]
        role                  = server.role
        salt_master_ip        = var.cluster.cloud_init.salt_master_ip
        salt_version          = var.cluster.cloud_init.salt_version
        salt_bootstrap_url    = var.cluster.cloud_init.salt_bootstrap_url
        salt_bootstrap_sha256 = var.cluster.cloud_init.salt_bootstrap_sha256
        interfaces            = local.interfaces[host]
        # virtio-blk exposes the first 20 characters of the volume id as the disk serial.
        volume_serial = server.volume == null ? null : substr(server.volume.id, 0, 20)
      })
    }))
  }
}

resource "openstack_networking_port_v2" "private" {
  for_each = var.servers

  name               = "${var.cluster.name_prefix}-${each.key}-private"
  network_id         = var.networks.private.network_id
  admin_state_up     = true
  security_group_ids = each.value.private.security_group_ids
  tags               = var.cluster.tags

  fixed_ip {
    subnet_id  = var.networks.private.subnet_id
    ip_address = each.value.private.ip
  }

  dynamic "allowed_address_pairs" {
    for_each = each.value.private.allowed_address_pairs
    content {
      ip_address = allowed_address_pairs.value
    }
  }
}

resource "openstack_networking_port_v2" "public" {
  for_each = local.public_servers

  name               = "${var.cluster.name_prefix}-${each.key}-public"
  network_id         = var.networks.public.network_id
  admin_state_up     = true
  security_group_ids = each.value.public.security_group_ids
  tags               = var.cluster.tags

  fixed_ip {
    subnet_id  = var.networks.public.subnet_id
    ip_address = each.value.public.ip
  }

  dynamic "allowed_address_pairs" {
    for_each = each.value.public.allowed_address_pairs
    content {
      ip_address = allowed_address_pairs.value
    }
  }

  lifecycle {
    precondition {
      condition     = var.networks.public != null
      error_message = "A server with a public port needs networks.public."
    }
  }
}

resource "openstack_networking_port_v2" "admin" {
  for_each = local.admin_servers

  name               = "${var.cluster.name_prefix}-${each.key}-admin"
  network_id         = var.admin_network_id
  admin_state_up     = true
  security_group_ids = each.value.admin.security_group_ids
  tags               = var.cluster.tags

  dynamic "allowed_address_pairs" {
    for_each = each.value.admin.allowed_address_pairs
    content {
      ip_address = allowed_address_pairs.value
    }
  }

  lifecycle {
    precondition {
      condition     = var.admin_network_id != null
      error_message = "A server with an admin port needs admin_network_id."
    }
  }
}

# Booting from a volume names the image by ID (the block device's source).
data "openstack_images_image_v2" "boot" {
  count       = anytrue([for server in values(var.servers) : server.boot_volume != null]) ? 1 : 0
  name        = var.cluster.image_name
  most_recent = true
}

resource "openstack_compute_instance_v2" "this" {
  for_each = var.servers

  name              = "${var.cluster.name_prefix}-${each.key}"
  image_name        = each.value.boot_volume == null ? var.cluster.image_name : null
  flavor_name       = coalesce(each.value.flavor_name, var.flavor_name)
  availability_zone = each.value.availability_zone
  # User data from the config drive: the private network has no router for the metadata service.
  config_drive = true
  user_data    = local.user_data[each.key]
  tags         = var.cluster.tags

  metadata = {
    kos_cluster   = var.cluster.name_prefix
    kos_role      = each.value.role
    kos_minion_id = local.fqdn[each.key]
  }

  dynamic "block_device" {
    for_each = each.value.boot_volume == null ? [] : [each.value.boot_volume]
    content {
      uuid                  = data.openstack_images_image_v2.boot[0].id
      source_type           = "image"
      destination_type      = "volume"
      boot_index            = 0
      volume_size           = block_device.value.size
      volume_type           = block_device.value.type
      delete_on_termination = true
    }
  }

  dynamic "scheduler_hints" {
    for_each = each.value.server_group_id == null ? [] : [each.value.server_group_id]
    content {
      group = scheduler_hints.value
    }
  }

  dynamic "network" {
    for_each = [for side in each.value.port_order : local.ports[each.key][side].id if contains(keys(local.ports[each.key]), side)]
    content {
      port = network.value
    }
  }

  lifecycle {
    # cloud-init reads user data at first boot only; later changes would only force a
    # rebuild (the master's pillar changes with every node added: the bootstrapper pushes
    # the salt_pillar output instead). Nova places a server in its group when it creates
    # it and cannot move a running one in: a group added to an existing cluster takes the
    # servers made from then on, instead of rebuilding every node.
    ignore_changes = [user_data, scheduler_hints]
  }
}

resource "openstack_networking_floatingip_v2" "this" {
  for_each = local.floating_servers

  pool        = var.cluster.external_network_name
  description = "kos ${var.cluster.name_prefix} ${local.fqdn[each.key]}"
  tags        = var.cluster.tags

  lifecycle {
    precondition {
      condition     = var.cluster.external_network_name != null
      error_message = "A server with a floating IP needs external_network_name."
    }
  }
}

resource "openstack_networking_floatingip_associate_v2" "this" {
  for_each = local.floating_servers

  floating_ip = openstack_networking_floatingip_v2.this[each.key].address
  port_id     = openstack_networking_port_v2.public[each.key].id
}

resource "openstack_compute_volume_attach_v2" "this" {
  for_each = { for host, server in var.servers : host => server if server.volume != null }

  instance_id = openstack_compute_instance_v2.this[each.key].id
  volume_id   = each.value.volume.id
}
