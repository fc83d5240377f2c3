# Read by the bootstrapper with `terraform output -json`; names and shapes are a contract.

output "cluster_name" {
  description = "Prefix of the OpenStack resource names and value of the kos-cluster tag."
  value       = var.cluster_name
}

output "ssh_user" {
  description = "Account to SSH in as, on the bastion and (through it) every other VM."
  value       = var.deploy_user
}

output "bastion_floating_ip" {
  description = "Floating IP of the bastion: the SSH entry point."
  value       = module.bastion.floating_ip
}

output "salt_master_private_ip" {
  description = "Private address of the Salt master (reached through the bastion)."
  value       = module.salt_master.private_ip
}

output "salt_master_floating_ip" {
  description = "Floating IP of the Salt master when it is a top master (top_master): the address the syndic environments set as their syndic_master. Null otherwise."
  value       = module.salt_master.floating_ip
}

output "api_floating_ip" {
  description = "Floating IP operators reach the Kubernetes API at: the API load balancer's (api_load_balancer = octavia), else k8s-cp-1's, or null when k8s-cp-1 is reached through the admin network."
  value       = local.api_floating_ip
}

output "api_load_balancer" {
  description = "The API load balancer (api_load_balancer = octavia): its ID, VIP, floating IP and pool members (address:port by hostname); null without one."
  value = local.octavia ? {
    id          = module.api_lb[0].id
    vip         = module.api_lb[0].vip
    floating_ip = module.api_lb[0].floating_ip
    members     = module.api_lb[0].pool_members
  } : null
}

output "minions" {
  description = "Every Salt minion by minion id (the FQDN): hostname, role (salt_master, bastion, control_plane or worker) and private IP."
  value = merge(
    {
      "salt.${local.domain}"    = { hostname = "salt", role = "salt_master", private_ip = module.salt_master.private_ip }
      "bastion.${local.domain}" = { hostname = "bastion", role = "bastion", private_ip = module.bastion.private_ip }
    },
    { for name, node in module.nodes.nodes : "${name}.${local.domain}" => { hostname = name, role = node.role, private_ip = node.private_ip } },
  )
}

output "kubernetes_nodes" {
  description = "Kubernetes nodes by minion id: role, private IP, floating IP (or null) and availability zone (or null)."
  value       = local.kubernetes_nodes
}

output "server_groups" {
  description = "The cluster's server group per role (server_group_policies): name, policy and the nodes created in it."
  value       = module.nodes.server_groups
}

output "salt_pillar" {
  description = "The pillar (YAML) cloud-init wrote to /srv/pillar/_from_terraform.sls on the Salt master; push it again after changes, since the master's user data is only read at its first boot."
  value       = local.salt_pillar
}
