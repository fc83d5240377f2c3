# The infrastructure follows the variables: counts, ports, security groups on ports only,
# the master's placement and volume, availability zones round-robin.

mock_provider "openstack" {
  source = "./tests/mocks"
}

variables {
  num_kube_nodes     = 5
  num_control_plane  = 3
  availability_zones = ["az-a", "az-b"]
}

run "counts_follow_variables" {
  command = apply

  assert {
    condition     = length(module.nodes.instances) == var.num_kube_nodes
    error_message = "one server per Kubernetes node expected"
  }

  assert {
    condition     = length([for node in values(output.kubernetes_nodes) : node if node.role == "control_plane"]) == var.num_control_plane
    error_message = "num_control_plane control-plane nodes expected"
  }

  assert {
    condition     = toset(keys(module.nodes.instances)) == toset(["k8s-cp-1", "k8s-cp-2", "k8s-cp-3", "k8s-worker-1", "k8s-worker-2"])
    error_message = "nodes must be named k8s-cp-<n> and k8s-worker-<n>"
  }

  # One private port per node, plus k8s-cp-1's public port.
  assert {
    condition     = length(flatten([for ports in values(module.nodes.ports) : values(ports)])) == var.num_kube_nodes + 1
    error_message = "node port count does not follow num_kube_nodes"
  }

  assert {
    condition     = toset(flatten([for host, ports in module.nodes.ports : [for side in keys(ports) : "${host}/${side}" if side != "private"]])) == toset(["k8s-cp-1/public"])
    error_message = "only k8s-cp-1 may have a port besides its private one"
  }

  assert {
    condition     = length(module.nodes.instances["k8s-cp-1"].ports) == 2 && length(module.nodes.instances["k8s-worker-2"].ports) == 1
    error_message = "k8s-cp-1 must be on both networks, the other nodes on the private one only"
  }
}

run "security_groups_on_ports_not_servers" {
  command = apply

  assert {
    condition = alltrue(concat(
      [for server in values(module.nodes.instances) : length(server.security_groups) == 0],
      [length(module.bastion.instances.bastion.security_groups) == 0, length(module.salt_master.instances.salt.security_groups) == 0],
    ))
    error_message = "no security group may be attached at server level"
  }

  assert {
    condition = alltrue([
      for port in flatten([for ports in values(merge(module.nodes.ports, module.bastion.ports, module.salt_master.ports)) : values(ports)]) :
      length(port.security_group_ids) > 0
    ])
    error_message = "every port needs its security groups"
  }

  assert {
    condition     = module.nodes.ports["k8s-cp-1"].public.security_group_ids == toset([module.nodes.security_group_ids.cluster, module.nodes.security_group_ids.edge])
    error_message = "k8s-cp-1's public port takes the cluster and the edge security groups"
  }

  assert {
    condition     = module.nodes.ports["k8s-worker-1"].private.security_group_ids == toset([module.nodes.security_group_ids.cluster])
    error_message = "private node ports take the cluster security group only"
  }
}

run "salt_master_private_only_with_volume" {
  command = apply

  assert {
    condition     = length(module.salt_master.instances.salt.ports) == 1 && module.salt_master.instances.salt.ports[0] == module.salt_master.ports.salt.private.id
    error_message = "the Salt master must be plugged into its private port only"
  }

  assert {
    condition = alltrue([
      for port in values(module.salt_master.ports.salt) : port.network_id == module.network.private_network_id && port.network_id != module.network.public_network_id
    ])
    error_message = "the Salt master must not be on the public network"
  }

  assert {
    condition     = module.salt_master.volume.instance_id == module.salt_master.instances.salt.id && module.salt_master.volume.volume_id == module.salt_master.volume.id
    error_message = "the state volume must be attached to the Salt master"
  }

  assert {
    condition     = module.salt_master.volume.size == var.salt_master_volume_size
    error_message = "the state volume size must follow salt_master_volume_size"
  }

  assert {
    condition     = one(module.salt_master.ports.salt.private.fixed_ip).ip_address == output.salt_master_private_ip
    error_message = "the master's port must carry the fixed address the minions are told"
  }
}

run "bastion_on_both_networks" {
  command = apply

  assert {
    condition     = module.bastion.instances.bastion.ports == [module.bastion.ports.bastion.public.id, module.bastion.ports.bastion.private.id]
    error_message = "the bastion must have a public and a private port"
  }

  assert {
    condition     = one(module.bastion.ports.bastion.private.fixed_ip).ip_address == module.network.private_subnet.gateway_ip
    error_message = "the bastion must hold the private network's gateway address"
  }

  assert {
    condition     = [for pair in module.bastion.ports.bastion.private.allowed_address_pairs : pair.ip_address] == ["0.0.0.0/0"]
    error_message = "the bastion's private port must let forwarded traffic through"
  }
}

run "availability_zones_round_robin" {
  command = apply

  assert {
    condition = {
      for id, node in output.kubernetes_nodes : id => node.availability_zone
      } == {
      "k8s-cp-1.kos.internal"     = "az-a"
      "k8s-cp-2.kos.internal"     = "az-b"
      "k8s-cp-3.kos.internal"     = "az-a"
      "k8s-worker-1.kos.internal" = "az-a"
      "k8s-worker-2.kos.internal" = "az-b"
    }
    error_message = "nodes must be spread over availability_zones round-robin over their slots (workers from slot worker_address_base - 20 = 10)"
  }

  assert {
    condition     = { for name, server in module.nodes.instances : name => server.availability_zone } == { for name, node in module.nodes.nodes : name => node.availability_zone }
    error_message = "servers must be created in the availability zone planned for them"
  }
}

# A node's address and zone follow from its own name: more control planes, a retired node
# or more workers move no other node.
run "names_keep_their_addresses_and_zones" {
  command = apply

  variables {
    num_control_plane = 5
    num_kube_nodes    = 8
    retired_nodes     = ["k8s-worker-1", "k8s-cp-4", "k8s-cp-5"]
  }

  assert {
    condition = {
      for id, node in output.kubernetes_nodes : id => [node.private_ip, node.availability_zone]
      } == {
      "k8s-cp-1.kos.internal"     = ["10.20.0.20", "az-a"]
      "k8s-cp-2.kos.internal"     = ["10.20.0.21", "az-b"]
      "k8s-cp-3.kos.internal"     = ["10.20.0.22", "az-a"]
      "k8s-worker-2.kos.internal" = ["10.20.0.31", "az-b"]
      "k8s-worker-3.kos.internal" = ["10.20.0.32", "az-a"]
    }
    error_message = "retired nodes must be gone and every other node keep the address and zone of its name"
  }

  assert {
    condition     = toset(keys(module.nodes.instances)) == toset(["k8s-cp-1", "k8s-cp-2", "k8s-cp-3", "k8s-worker-2", "k8s-worker-3"])
    error_message = "Terraform must keep a server for every node that is not retired, and none for the retired ones"
  }
}

# Clusters made before worker_address_base keep their workers right after the control planes.
run "legacy_worker_addresses" {
  command = plan

  variables {
    worker_address_base = 23
  }

  assert {
    condition = {
      for id, node in output.kubernetes_nodes : id => [node.private_ip, node.availability_zone]
      } == {
      "k8s-cp-1.kos.internal"     = ["10.20.0.20", "az-a"]
      "k8s-cp-2.kos.internal"     = ["10.20.0.21", "az-b"]
      "k8s-cp-3.kos.internal"     = ["10.20.0.22", "az-a"]
      "k8s-worker-1.kos.internal" = ["10.20.0.23", "az-b"]
      "k8s-worker-2.kos.internal" = ["10.20.0.24", "az-a"]
    }
    error_message = "worker_address_base = 20 + num_control_plane must give the layout of clusters made before it"
  }
}

run "admin_network_mode" {
  command = apply

  variables {
    first_control_plane_access = "admin_network"
    admin_network_name         = "admin-net"
    num_kube_nodes             = 2
    num_control_plane          = 1
    availability_zones         = []
  }

  assert {
    condition     = toset(flatten([for host, ports in module.nodes.ports : [for side in keys(ports) : "${host}/${side}"]])) == toset(["k8s-cp-1/private", "k8s-cp-1/admin", "k8s-worker-1/private"])
    error_message = "in admin-network mode k8s-cp-1 has a private and an admin port, and no public port"
  }

  assert {
    condition     = output.api_floating_ip == null && output.kubernetes_nodes["k8s-cp-1.kos.internal"].floating_ip == null
    error_message = "no floating IP in admin-network mode"
  }

  assert {
    condition     = yamldecode(output.salt_pillar).kos.api == { load_balancer = "none", vip = null, floating_ip = null, admin_ip = "192.0.2.50" }
    error_message = "the pillar must carry the admin-network address of the API"
  }

  assert {
    condition     = output.kubernetes_nodes["k8s-cp-1.kos.internal"].availability_zone == null
    error_message = "without availability_zones the zone is left to Nova (null)"
  }

  assert {
    condition = strcontains(
      one([for file in yamldecode(nonsensitive(module.nodes.user_data["k8s-cp-1"])).write_files : file.content if file.path == "/usr/local/sbin/kos-firstboot"]),
      "configure_interface \"fa:16:3e:00:00:01\" \"own-table\" \"192.0.2.50\"",
    )
    error_message = "cloud-init must configure k8s-cp-1's admin interface"
  }
}
