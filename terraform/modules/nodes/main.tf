# Kubernetes nodes, keyed by hostname. Security groups sit on the ports only; what they let
# through between the nodes follows the one distribution variable.

locals {
  admin_nodes = { for name, node in var.nodes : name => node if node.admin_network }

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

  # From load balancers. Services of type LoadBalancer: the cloud-controller-manager leaves
  # the nodes' security groups alone (manage-security-groups is off), so the amphorae, whose
  # member ports sit in the private network's DHCP pool, are let in to the NodePorts here
  # (cloud-provider-openstack pkg/openstack/loadbalancer_sg.go opens the same ports). The
  # API load balancer reaches the API port.
  load_balancer_rules = merge(
    {
      "nodeports-tcp-lb" = { protocol = "tcp", min = 30000, max = 32767, cidr = var.load_balancer_cidr, description = "NodePort services (TCP) from load balancers" }
      "nodeports-udp-lb" = { protocol = "udp", min = 30000, max = 32767, cidr = var.load_balancer_cidr, description = "NodePort services (UDP) from load balancers" }
    },
    { for cidr in var.api_load_balancer_sources : "api-lb-${cidr}" => { protocol = "tcp", min = var.api_port, max = var.api_port, cidr = cidr, description = "Kubernetes API from the API load balancer (${cidr})" } },
  )

  # From outside, on k8s-cp-1's public or admin port only.
  edge_rules = merge(
    { for cidr in var.api_allowed_cidrs : "api-${cidr}" => { min = var.api_port, max = var.api_port, cidr = cidr, description = "Kubernetes API from ${cidr}" } },
    { for cidr in var.ingress_allowed_cidrs : "http-${cidr}" => { min = 80, max = 80, cidr = cidr, description = "HTTP ingress from ${cidr}" } },
    { for cidr in var.ingress_allowed_cidrs : "https-${cidr}" => { min = 443, max = 443, cidr = cidr, description = "HTTPS ingress from ${cidr}" } },
  )
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
  name        = "${var.cluster.name_prefix}-k8s"
  description = "kos Kubernetes nodes: cluster traffic inside the private network, SSH from the bastion"
  tags        = var.cluster.tags
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

resource "openstack_networking_secgroup_rule_v2" "load_balancers" {
  for_each = local.load_balancer_rules

  security_group_id = openstack_networking_secgroup_v2.cluster.id
  description       = each.value.description
  direction         = "ingress"
  ethertype         = "IPv4"
  protocol          = each.value.protocol
  port_range_min    = each.value.min
  port_range_max    = each.value.max
  remote_ip_prefix  = each.value.cidr
}

resource "openstack_networking_secgroup_v2" "edge" {
  name        = "${var.cluster.name_prefix}-k8s-edge"
  description = "kos first control plane, outside port: Kubernetes API and HTTP(S) ingress"
  tags        = var.cluster.tags
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

# A server group per role whose policy is not none: Nova places the role's servers apart
# (anti-affinity: on distinct compute hosts or not at all; soft-anti-affinity: apart where
# it can). The group is the cluster's own, named after it.
resource "openstack_compute_servergroup_v2" "role" {
  for_each = { for role, policy in var.server_group_policies : role => policy if policy != "none" && contains([for node in values(var.nodes) : node.role], role) }

  name     = "${var.cluster.name_prefix}-${replace(each.key, "_", "-")}"
  policies = [each.value]
}

module "server" {
  source = "../server"

  cluster            = var.cluster
  networks           = var.networks
  admin_network_id   = one(data.openstack_networking_network_v2.admin[*].id)
  root_password_hash = var.root_password_hash

  servers = {
    for name, node in var.nodes : name => {
      role              = node.role
      template          = "minion"
      availability_zone = node.availability_zone
      flavor_name       = node.flavor_name
      boot_volume       = node.boot_volume
      server_group_id   = try(openstack_compute_servergroup_v2.role[node.role].id, null)
      private = {
        ip                    = node.private_ip
        security_group_ids    = [openstack_networking_secgroup_v2.cluster.id]
        allowed_address_pairs = local.address_pairs
        # A floating IP answers through the public side, so that side carries the default route.
        interface_mode = node.public_ip != null ? "no-routes" : null
      }
      public = node.public_ip == null ? null : {
        ip                    = node.public_ip
        security_group_ids    = [openstack_networking_secgroup_v2.cluster.id, openstack_networking_secgroup_v2.edge.id]
        allowed_address_pairs = local.address_pairs
        interface_mode        = "default"
        floating_ip           = node.floating_ip
      }
      admin = !node.admin_network ? null : {
        security_group_ids    = [openstack_networking_secgroup_v2.cluster.id, openstack_networking_secgroup_v2.edge.id]
        allowed_address_pairs = local.address_pairs
        interface_mode        = "own-table"
      }
    }
  }
}

# Where the nodes' servers lived before modules/server
# (https://developer.hashicorp.com/terraform/language/moved): every instance keeps its
# hostname key, so existing nodes are moved, not rebuilt.
moved {
  from = openstack_networking_port_v2.private
  to   = module.server.openstack_networking_port_v2.private
}

moved {
  from = openstack_networking_port_v2.public
  to   = module.server.openstack_networking_port_v2.public
}

moved {
  from = openstack_networking_port_v2.admin
  to   = module.server.openstack_networking_port_v2.admin
}

moved {
  from = openstack_compute_instance_v2.node
  to   = module.server.openstack_compute_instance_v2.this
}

moved {
  from = openstack_networking_floatingip_v2.node
  to   = module.server.openstack_networking_floatingip_v2.this
}

moved {
  from = openstack_networking_floatingip_associate_v2.node
  to   = module.server.openstack_networking_floatingip_associate_v2.this
}
