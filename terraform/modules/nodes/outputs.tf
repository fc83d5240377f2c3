output "nodes" {
  description = "Every node by hostname: role, private IP, availability zone (or null), floating IP (or null) and admin-network IP (or null)."
  value = {
    for name, node in var.nodes : name => {
      role              = node.role
      private_ip        = node.private_ip
      availability_zone = node.availability_zone
      public_ip         = node.public_ip
      floating_ip       = lookup(module.server.floating_ips, name, null)
      admin_ip          = lookup(module.server.admin_ips, name, null)
    }
  }
}

output "instances" {
  description = "Every node's server, by hostname (modules/server)."
  value       = module.server.instances
}

output "ports" {
  description = "Every node's ports, by hostname and side (modules/server): private, and public or admin on k8s-cp-1."
  value       = module.server.ports
}

output "cluster_rules" {
  description = "What the cluster security group lets in, by rule name: protocol (null: any), port range and source (cluster nodes: the members of the group itself)."
  value = merge(
    { for name, rule in openstack_networking_secgroup_rule_v2.cluster : name => {
      protocol = rule.protocol, min = rule.port_range_min, max = rule.port_range_max,
      source   = rule.remote_group_id == openstack_networking_secgroup_v2.cluster.id ? "cluster nodes" : rule.remote_ip_prefix
    } },
    { for rule in openstack_networking_secgroup_rule_v2.pods : "pods" => {
      protocol = null, min = null, max = null, source = rule.remote_ip_prefix
    } },
    { for name, rule in openstack_networking_secgroup_rule_v2.load_balancers : name => {
      protocol = rule.protocol, min = rule.port_range_min, max = rule.port_range_max, source = rule.remote_ip_prefix
    } },
  )
}

output "edge_rules" {
  description = "What the edge security group (k8s-cp-1's outside port) lets in, by rule name: port range and source."
  value       = { for name, rule in openstack_networking_secgroup_rule_v2.edge : name => { min = rule.port_range_min, max = rule.port_range_max, source = rule.remote_ip_prefix } }
}

output "security_group_ids" {
  description = "IDs of the cluster and edge security groups."
  value = {
    cluster = openstack_networking_secgroup_v2.cluster.id
    edge    = openstack_networking_secgroup_v2.edge.id
  }
}

output "user_data" {
  description = "The cloud-config handed to each node, by hostname (sensitive: may hold root's password hash)."
  value       = module.server.user_data
  sensitive   = true
}

output "server_groups" {
  description = "The server group of each role that has one: name, policy and members' hostnames."
  value = {
    for role, group in openstack_compute_servergroup_v2.role : role => {
      id      = group.id
      name    = group.name
      policy  = one(group.policies)
      members = sort([for name, node in var.nodes : name if node.role == role])
    }
  }
}
