output "fqdns" {
  description = "FQDN and minion id of every server, by hostname."
  value       = local.fqdn
}

output "instances" {
  description = "Every server by hostname: id, name, availability zone, flavor, image (null when it boots from a volume), boot volume, server group, server-level security groups (expected empty) and the ports it is plugged into, in order."
  value = {
    for host, server in openstack_compute_instance_v2.this : host => {
      id                = server.id
      name              = server.name
      availability_zone = server.availability_zone
      flavor_name       = server.flavor_name
      image_name        = server.image_name
      # the root disk when it is a Cinder volume: {source image id, size, type}
      boot_volume     = one([for bd in server.block_device : { image_id = bd.uuid, size = bd.volume_size, type = bd.volume_type } if bd.boot_index == 0])
      server_group_id = try(one(server.scheduler_hints).group, null)
      security_groups = server.security_groups
      ports           = [for network in server.network : network.port]
    }
  }
}

output "ports" {
  description = "Every server's ports by hostname, then by side (private, public, admin)."
  value       = local.ports
}

output "floating_ips" {
  description = "Floating IP of every server that has one, by hostname."
  value       = { for host, ip in openstack_networking_floatingip_v2.this : host => ip.address }
}

output "admin_ips" {
  description = "Admin-network address of every server that has an admin port, by hostname."
  value       = { for host, port in openstack_networking_port_v2.admin : host => port.all_fixed_ips[0] }
}

output "volume_attachments" {
  description = "Every attached volume, by hostname: the server and volume ids the attachment joins."
  value = {
    for host, attachment in openstack_compute_volume_attach_v2.this : host => {
      instance_id = attachment.instance_id
      volume_id   = attachment.volume_id
    }
  }
}

output "user_data" {
  description = "The cloud-config handed to each server, by hostname (sensitive: may hold root's password hash)."
  value       = local.user_data
  sensitive   = true
}
