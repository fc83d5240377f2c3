output "nodes" {
  description = "Every node by hostname: role, private IP, availability zone (or null), floating IP (or null) and admin-network IP (or null)."
  value = {
    for name, node in var.nodes : name => {
      role              = node.role
      private_ip        = node.private_ip
      availability_zone = node.availability_zone
      public_ip         = node.public_ip
      floating_ip       = try(openstack_networking_floatingip_v2.node[name].address, null)
      admin_ip          = try(openstack_networking_port_v2.admin[name].all_fixed_ips[0], null)
    }
  }
}

output "instances" {
  description = "Every server by hostname: id, name, availability zone, server-level security groups (expected empty) and the ports it is plugged into, in order."
  value = {
    for name, server in openstack_compute_instance_v2.node : name => {
      id                = server.id
      name              = server.name
      availability_zone = server.availability_zone
      security_groups   = server.security_groups
      ports             = [for network in server.network : network.port]
    }
  }
}

output "ports" {
  description = "Every node port, keyed <hostname>/<side> (private, public, admin)."
  value = merge(
    { for name, port in openstack_networking_port_v2.private : "${name}/private" => port },
    { for name, port in openstack_networking_port_v2.public : "${name}/public" => port },
    { for name, port in openstack_networking_port_v2.admin : "${name}/admin" => port },
  )
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
  )
}

output "security_group_ids" {
  description = "IDs of the cluster and edge security groups."
  value = {
    cluster = openstack_networking_secgroup_v2.cluster.id
    edge    = openstack_networking_secgroup_v2.edge.id
  }
}

output "user_data" {
  description = "The cloud-config handed to each node (sensitive: may hold root's password hash)."
  value       = local.user_data
  sensitive   = true
}
