# The Kubernetes nodes by name: one source for the root module and for kos, which evaluates
# this module beside the root module's variables before anything touches the cloud. Pure (no
# provider). A node's address follows from its own name, never from the others':
# k8s-cp-<n> holds host 19 + n, k8s-worker-<n> host worker_address_base - 1 + n, any
# other name the address it is given. The counters of a cluster described before the map
# hand out the same names, so the same servers and addresses.

locals {
  from_map = {
    for name, node in coalesce(var.kubernetes_nodes, {}) : name => {
      role        = node.role
      address     = node.address
      az          = node.az
      flavor      = node.flavor
      boot_volume = node.boot_volume
    }
  }
  from_counters = {
    for name, role in merge(
      { for n in range(1, var.num_control_plane + 1) : "k8s-cp-${n}" => "control_plane" },
      { for n in range(1, var.num_kube_nodes - var.num_control_plane + 1) : "k8s-worker-${n}" => "worker" },
    ) : name => { role = role, address = null, az = null, flavor = null, boot_volume = null } if !contains(var.retired_nodes, name)
  }
  given = var.kubernetes_nodes == null ? local.from_counters : local.from_map
  addressed = {
    for name, node in local.given : name => merge(node, {
      address = node.address != null ? node.address : (
        can(regex("^k8s-cp-[1-9][0-9]*$", name)) ? 19 + tonumber(regex("[0-9]+$", name)) :
        can(regex("^k8s-worker-[1-9][0-9]*$", name)) ? var.worker_address_base - 1 + tonumber(regex("[0-9]+$", name)) :
        null
      )
    })
  }
  # A node without a zone of its own gets one round-robin over address slots (host 20 is
  # slot 0), so adding or retiring a node never moves another to another zone.
  zones = length(var.availability_zones)
  nodes = {
    for name, node in local.addressed : name => merge(node, {
      az = node.az != null ? node.az : (local.zones > 0 ? var.availability_zones[(node.address - 20) % local.zones] : null)
      # a node's own, else its role's; null: the flavor's disk
      boot_volume = node.boot_volume != null ? node.boot_volume : lookup(var.boot_volumes, node.role, null)
    })
  }
  # Fixed addresses: hosts 20 and up, below DHCP's pool in the upper half of the network.
  address_limit = pow(2, 32 - tonumber(split("/", var.private_cidr)[1])) / 2
  addresses     = [for node in values(local.nodes) : node.address]
}
