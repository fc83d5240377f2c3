output "vip" {
  description = "The load balancer's private address: the cluster's own clients use it."
  value       = openstack_lb_loadbalancer_v2.api.vip_address
}

output "floating_ip" {
  description = "The load balancer's floating IP: operators, kos and the pipeline use it."
  value       = openstack_networking_floatingip_v2.api.address
}

output "id" {
  description = "The load balancer's ID (kos status reads its members' health)."
  value       = openstack_lb_loadbalancer_v2.api.id
}

output "pool_members" {
  description = "The pool's members: address:port by hostname."
  value       = { for m in openstack_lb_members_v2.api.member : m.name => "${m.address}:${m.protocol_port}" }
}

# The resources themselves, for terraform test.
output "loadbalancer" {
  description = "The load balancer resource."
  value       = openstack_lb_loadbalancer_v2.api
}

output "listener" {
  description = "The listener resource."
  value       = openstack_lb_listener_v2.api
}

output "pool" {
  description = "The pool resource."
  value       = openstack_lb_pool_v2.api
}

output "monitor" {
  description = "The health monitor resource."
  value       = openstack_lb_monitor_v2.api
}
