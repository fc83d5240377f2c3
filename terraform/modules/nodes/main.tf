# Kubernetes nodes, keyed by hostname. Security groups sit on the ports only; what they let
# through between the nodes follows the one distribution variable.

locals {
  public_nodes   = { for name, node in var.nodes : name => node if node.public_ip != null }
  floating_nodes = { for name, node in var.nodes : name => node if node.floating_ip }
  admin_nodes    = { for name, node in var.nodes : name => node if node.admin_network }

  # What each distribution's pod network needs between the nodes.
  cni = {
    # microk8s runs Calico with its VXLAN backend (https://microk8s.io/docs/change-cidr) and
    # the formula keeps it: pod traffic crosses the network encapsulated between node
    # addresses, UDP 4789.
    microk8s = {
      routed = false
      ports = {
        vxlan = { protocol = "udp", min = 4789, max = 4789, description = "Calico VXLAN (microk8s pod network)" }
      }
    }
    # kube-router routes pods without encapsulation (BGP between the nodes): packets keep
    # pod and service addresses, which every port must allow.
    kubeadm = {
      routed = true
      ports = {
        bgp              = { protocol = "tcp", min = 179, max = 179, description = "BGP (kube-router)" }
        "kube-router-hc" = { protocol = "tcp", min = 20244, max = 20244, description = "kube-router health" }
      }
    }
  }
  routed = local.cni[var.distribution].routed

  address_pairs = local.routed ? [var.pod_cidr, var.service_cidr] : []

  # Between nodes, inside the private network.
  cluster_ports = merge(
    {
      api             = { protocol = "tcp", min = var.api_port, max = var.api_port, description = "Kubernetes API" }
      kubelet         = { protocol = "tcp", min = 10250, max = 10250, description = "kubelet" }
      "nodeports-tcp" = { protocol = "tcp", min = 30000, max = 32767, description = "NodePort services (TCP)" }
      "nodeports-udp" = { protocol = "udp", min = 30000, max = 32767, description = "NodePort services (UDP)" }
    },
    var.distribution == "microk8s" ? {
      dqlite          = { protocol = "tcp", min = 19001, max = 19001, description = "dqlite (microk8s datastore)" }
      "cluster-agent" = { protocol = "tcp", min = 25000, max = 25000, description = "microk8s cluster agent (join)" }
      } : {
      etcd = { protocol = "tcp", min = 2379, max = 2380, description = "etcd" }
    },
    local.cni[var.distribution].ports,
  )

  # From outside, on k8s-cp-1's public or admin port only.
  edge_rules = merge(
    { for cidr in var.api_allowed_cidrs : "api-${cidr}" => { min = var.api_port, max = var.api_port, cidr = cidr, description = "Kubernetes API from ${cidr}" } },
    { for cidr in var.ingress_allowed_cidrs : "http-${cidr}" => { min = 80, max = 80, cidr = cidr, description = "HTTP ingress from ${cidr}" } },
    { for cidr in var.ingress_allowed_cidrs : "https-${cidr}" => { min = 443, max = 443, cidr = cidr, description = "HTTPS ingress from ${cidr}" } },
  )

  interfaces = {
    for name, node in var.nodes : name => concat(
      # A floating IP answers through the public side, so that side carries the default route.
      contains(keys(local.public_nodes), name) ? [
        { mac = openstack_networking_port_v2.public[name].mac_address, mode = "default", ip = node.public_ip },
        { mac = openstack_networking_port_v2.private[name].mac_address, mode = "no-routes", ip = node.private_ip },
      ] : [],
      contains(keys(local.admin_nodes), name) ? [
        { mac = openstack_networking_port_v2.admin[name].mac_address, mode = "own-table", ip = openstack_networking_port_v2.admin[name].all_fixed_ips[0] },
      ] : [],
    )
  }

  user_data = {
    for name, node in var.nodes : name => templatefile("${path.module}/../../cloud-init/minion.tftpl", {
      hostname           = name
      fqdn               = "${name}.${var.cloud_init.domain}"
      domain             = var.cloud_init.domain
      deploy_user        = var.cloud_init.deploy_user
      ssh_public_keys    = var.cloud_init.ssh_public_keys
      salt_master_ip     = var.cloud_init.salt_master_ip
      salt_transport     = var.cloud_init.salt_transport
      hosts              = merge(var.cloud_init.hosts, { (name) = node.private_ip })
      root_password_hash = var.root_password_hash
      firstboot = templatefile("${path.module}/../../cloud-init/kos-firstboot.sh.tftpl", {
        fqdn                  = "${name}.${var.cloud_init.domain}"
        role                  = node.role
        salt_master_ip        = var.cloud_init.salt_master_ip
        salt_version          = var.cloud_init.salt_version
        salt_bootstrap_url    = var.cloud_init.salt_bootstrap_url
        salt_bootstrap_sha256 = var.cloud_init.salt_bootstrap_sha256
        volume_serial         = null
        interfaces            = local.interfaces[name]
      })
    })
  }
}

data "openstack_networking_network_v2" "admin" {
  count = length(local.admin_nodes) > 0 ? 1 : 0

  name = var.admin_network_name

  lifecycle {
    precondition {
      condition     = var.admin_network_name != null
      error_message = "A node asks for an admin-network port but admin_network_name is not set."
    }
  }
}

resource "openstack_networking_secgroup_v2" "cluster" {
  name        = "${var.name_prefix}-k8s"
  description = "kos Kubernetes nodes: cluster traffic inside the private network, SSH from the bastion"
  tags        = var.tags
}

resource "openstack_networking_secgroup_rule_v2" "cluster" {
  for_each = local.cluster_ports

  security_group_id = openstack_networking_secgroup_v2.cluster.id
  description       = "${each.value.description} from the cluster's nodes"
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = each.value.protocol
  port_range_min    = each.value.min
  port_range_max    = each.value.max
  # The nodes' own group, not the private network: the salt master and the bastion sit
  # in that network too, and have no business with etcd, the kubelet or the API.
  remote_group_id = openstack_networking_secgroup_v2.cluster.id
}

resource "openstack_networking_secgroup_rule_v2" "ssh" {
  security_group_id = openstack_networking_secgroup_v2.cluster.id
  description       = "SSH from the bastion only"
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  port_range_min    = 22
  port_range_max    = 22
  remote_ip_prefix  = "${var.bastion_private_ip}/32"
}

resource "openstack_networking_secgroup_rule_v2" "icmp" {
  security_group_id = openstack_networking_secgroup_v2.cluster.id
  description       = "ICMP from the private network"
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "icmp"
  remote_ip_prefix  = var.private_cidr
}

# Routed pod traffic keeps the pod's source address.
resource "openstack_networking_secgroup_rule_v2" "pods" {
  count = local.routed ? 1 : 0

  security_group_id = openstack_networking_secgroup_v2.cluster.id
  description       = "any traffic from pods"
  direction         = "ingress"
  ethertype         = "IPv4"
  remote_ip_prefix  = var.pod_cidr
}

resource "openstack_networking_secgroup_v2" "edge" {
  name        = "${var.name_prefix}-k8s-edge"
  description = "kos first control plane, outside port: Kubernetes API and HTTP(S) ingress"
  tags        = var.tags
}

resource "openstack_networking_secgroup_rule_v2" "edge" {
  for_each = local.edge_rules

  security_group_id = openstack_networking_secgroup_v2.edge.id
  description       = each.value.description
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = "tcp"
  port_range_min    = each.value.min
  port_range_max    = each.value.max
  remote_ip_prefix  = each.value.cidr
}

resource "openstack_networking_port_v2" "private" {
  for_each = var.nodes

  name               = "${var.name_prefix}-${each.key}-private"
  network_id         = var.private_network_id
  admin_state_up     = true
  security_group_ids = [openstack_networking_secgroup_v2.cluster.id]
  tags               = var.tags

  fixed_ip {
    subnet_id  = var.private_subnet_id
    ip_address = each.value.private_ip
  }

  dynamic "allowed_address_pairs" {
    for_each = local.address_pairs
    content {
      ip_address = allowed_address_pairs.value
    }
  }
}

resource "openstack_networking_port_v2" "public" {
  for_each = local.public_nodes

  name               = "${var.name_prefix}-${each.key}-public"
  network_id         = var.public_network_id
  admin_state_up     = true
  security_group_ids = [openstack_networking_secgroup_v2.cluster.id, openstack_networking_secgroup_v2.edge.id]
  tags               = var.tags

  fixed_ip {
    subnet_id  = var.public_subnet_id
    ip_address = each.value.public_ip
  }

  dynamic "allowed_address_pairs" {
    for_each = local.address_pairs
    content {
      ip_address = allowed_address_pairs.value
    }
  }
}

resource "openstack_networking_port_v2" "admin" {
  for_each = local.admin_nodes

  name               = "${var.name_prefix}-${each.key}-admin"
  network_id         = data.openstack_networking_network_v2.admin[0].id
  admin_state_up     = true
  security_group_ids = [openstack_networking_secgroup_v2.cluster.id, openstack_networking_secgroup_v2.edge.id]
  tags               = var.tags

  dynamic "allowed_address_pairs" {
    for_each = local.address_pairs
    content {
      ip_address = allowed_address_pairs.value
    }
  }
}

resource "openstack_compute_instance_v2" "node" {
  for_each = var.nodes

  name              = "${var.name_prefix}-${each.key}"
  image_name        = var.image_name
  flavor_name       = var.flavor_name
  availability_zone = each.value.availability_zone
  # User data from the config drive: the private network has no router for the metadata service.
  config_drive = true
  user_data    = local.user_data[each.key]
  tags         = var.tags

  metadata = {
    kos_cluster   = var.name_prefix
    kos_role      = each.value.role
    kos_minion_id = "${each.key}.${var.cloud_init.domain}"
  }

  network {
    port = openstack_networking_port_v2.private[each.key].id
  }

  dynamic "network" {
    for_each = contains(keys(local.public_nodes), each.key) ? [openstack_networking_port_v2.public[each.key].id] : []
    content {
      port = network.value
    }
  }

  dynamic "network" {
    for_each = contains(keys(local.admin_nodes), each.key) ? [openstack_networking_port_v2.admin[each.key].id] : []
    content {
      port = network.value
    }
  }

  lifecycle {
    # cloud-init reads user data at first boot only; later changes would only force a rebuild.
    ignore_changes = [user_data]
  }
}

resource "openstack_networking_floatingip_v2" "node" {
  for_each = local.floating_nodes

  pool        = var.external_network_name
  description = "kos ${var.name_prefix} ${each.key}.${var.cloud_init.domain}"
  tags        = var.tags
}

resource "openstack_networking_floatingip_associate_v2" "node" {
  for_each = local.floating_nodes

  floating_ip = openstack_networking_floatingip_v2.node[each.key].address
  port_id     = openstack_networking_port_v2.public[each.key].id
}
