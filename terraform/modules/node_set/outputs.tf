output "nodes" {
  description = "name => {role, address (host number in private_cidr), az (null: Nova chooses), flavor (null: kube_node_flavor), boot_volume ({size, type}; null: the flavor's disk)}"
  value       = local.nodes

  precondition {
    condition     = length(distinct(local.addresses)) == length(local.addresses)
    error_message = "kubernetes_nodes: two nodes have the same address; give each node its own (a k8s-worker-<n>'s is worker_address_base - 1 + n)."
  }

  precondition {
    condition     = alltrue([for a in local.addresses : a >= 20 && a < local.address_limit && floor(a) == a])
    error_message = "kubernetes_nodes: every node's address must be a whole host number from 20 up to below the DHCP pool in the upper half of private_cidr; use a larger private_cidr or lower addresses."
  }
}
