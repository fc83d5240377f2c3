output "external_network_id" {
  description = "ID of the external network."
  value       = data.openstack_networking_network_v2.external.id
}

output "router_id" {
  description = "ID of the router."
  value       = openstack_networking_router_v2.this.id
}

output "public_network_id" {
  description = "ID of the public network."
  value       = openstack_networking_network_v2.public.id
}

# Taken from the router interface on purpose: ports on the public subnet then wait for
# the interface, which a floating IP association needs to exist.
output "public_subnet_id" {
  description = "ID of the public subnet (available once the router is attached to it)."
  value       = openstack_networking_router_interface_v2.public.subnet_id
}

output "private_network_id" {
  description = "ID of the private network."
  value       = openstack_networking_network_v2.private.id
}

output "private_subnet_id" {
  description = "ID of the private subnet."
  value       = openstack_networking_subnet_v2.private.id
}

output "public_subnet" {
  description = "The public subnet, for tests and callers that need its attributes."
  value       = openstack_networking_subnet_v2.public
}

output "private_subnet" {
  description = "The private subnet, for tests and callers that need its attributes."
  value       = openstack_networking_subnet_v2.private
}

output "router_private_port" {
  description = "The router's port on the private subnet (route_public_via_router), or null."
  value       = one(openstack_networking_port_v2.router_private[*])
}

output "public_route" {
  description = "The private subnet's route to the public one through the router, or null."
  value       = try({ destination_cidr = openstack_networking_subnet_route_v2.public_via_router[0].destination_cidr, next_hop = openstack_networking_subnet_route_v2.public_via_router[0].next_hop }, null)
}
