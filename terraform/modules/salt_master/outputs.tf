output "fqdn" {
  description = "FQDN and minion id of the master."
  value       = local.fqdn
}

output "private_ip" {
  description = "Fixed private address of the master."
  value       = var.private_ip
}

output "instance" {
  description = "The master server: id, name, availability zone, server-level security groups (expected empty) and the ports it is plugged into, in order."
  value = {
    id                = openstack_compute_instance_v2.this.id
    name              = openstack_compute_instance_v2.this.name
    availability_zone = openstack_compute_instance_v2.this.availability_zone
    security_groups   = openstack_compute_instance_v2.this.security_groups
    ports             = [for network in openstack_compute_instance_v2.this.network : network.port]
  }
}

output "public_ip" {
  description = "Fixed public address of a top master, or null."
  value       = var.top_master ? var.public_ip : null
}

output "floating_ip" {
  description = "Floating IP of a top master (where syndics join it), or null."
  value       = one(openstack_networking_floatingip_v2.this[*].address)
}

output "ports" {
  description = "The master's ports by side: private, and public on a top master."
  value = merge(
    { private = openstack_networking_port_v2.private },
    { for port in openstack_networking_port_v2.public : "public" => port },
  )
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
  value = {
    id          = openstack_blockstorage_volume_v3.state.id
    name        = openstack_blockstorage_volume_v3.state.name
    size        = openstack_blockstorage_volume_v3.state.size
    instance_id = openstack_compute_volume_attach_v2.state.instance_id
    volume_id   = openstack_compute_volume_attach_v2.state.volume_id
  }
}

output "user_data" {
  description = "The cloud-config handed to the master (sensitive: may hold root's password hash)."
  value       = local.user_data
  sensitive   = true
}
