output "floating_ip" {
  description = "Floating IP of the bastion."
  value       = module.server.floating_ips[local.hostname]
}

output "private_ip" {
  description = "Fixed address of the bastion on the private network."
  value       = var.private_ip
}

output "instances" {
  description = "The bastion's server, by hostname (modules/server)."
  value       = module.server.instances
}

output "ports" {
  description = "The bastion's ports, by hostname and side (modules/server)."
  value       = module.server.ports
}

output "user_data" {
  description = "The bastion's cloud-config, by hostname (sensitive: may hold root's password hash)."
  value       = module.server.user_data
  sensitive   = true
}
