output "fqdn" {
  description = "FQDN and minion id of the bastion."
  value       = local.fqdn
}

output "floating_ip" {
  description = "Floating IP of the bastion."
  value       = openstack_networking_floatingip_v2.this.address
}

output "public_ip" {
  description = "Fixed address of the bastion on the public network."
  value       = var.public_ip
}

output "private_ip" {
  description = "Fixed address of the bastion on the private network."
  value       = var.private_ip
}

output "instance" {
  description = "The bastion server: id, name, availability zone, server-level security groups (expected empty) and the ports it is plugged into, in order."
  value = {
    id                = openstack_compute_instance_v2.this.id
    name              = openstack_compute_instance_v2.this.name
    availability_zone = openstack_compute_instance_v2.this.availability_zone
    security_groups   = openstack_compute_instance_v2.this.security_groups
    ports             = [for network in openstack_compute_instance_v2.this.network : network.port]
  }
}

output "ports" {
  description = "The bastion's ports by side (public, private)."
  value = {
    public  = openstack_networking_port_v2.public
    private = openstack_networking_port_v2.private
  }
}

output "user_data" {
  description = "The cloud-config handed to the bastion (sensitive: may hold root's password hash)."
  value       = local.user_data
  sensitive   = true
}
