output "private_ip" {
  description = "Fixed private address of the master."
  value       = var.private_ip
}

output "floating_ip" {
  description = "Floating IP of a top master (where syndics join it), or null."
  value       = lookup(module.server.floating_ips, local.hostname, null)
}

output "instances" {
  description = "The master's server, by hostname (modules/server)."
  value       = module.server.instances
}

output "ports" {
  description = "The master's ports, by hostname and side (modules/server): private, and public on a top master."
  value       = module.server.ports
}

output "rules" {
  description = "What the master's security group lets in, by rule name (salt, ssh, icmp, and syndic-<cidr> on a top master): protocol, port range and source."
  value = merge(
    { for name, rule in {
      salt = openstack_networking_secgroup_rule_v2.salt
      ssh  = openstack_networking_secgroup_rule_v2.ssh
      icmp = openstack_networking_secgroup_rule_v2.icmp
      } : name => {
      protocol = rule.protocol, min = rule.port_range_min, max = rule.port_range_max, source = rule.remote_ip_prefix
    } },
    { for cidr, rule in openstack_networking_secgroup_rule_v2.syndics : "syndic-${cidr}" => {
      protocol = rule.protocol, min = rule.port_range_min, max = rule.port_range_max, source = rule.remote_ip_prefix
    } },
  )
}

output "volume" {
  description = "The persistent state volume and its attachment to the master."
  value = merge(
    {
      id   = openstack_blockstorage_volume_v3.state.id
      name = openstack_blockstorage_volume_v3.state.name
      size = openstack_blockstorage_volume_v3.state.size
    },
    module.server.volume_attachments[local.hostname],
  )
}

output "user_data" {
  description = "The master's cloud-config, by hostname (sensitive: may hold root's password hash)."
  value       = module.server.user_data
  sensitive   = true
}
