# Master of masters (Salt syndic topology): an environment's master may run salt-syndic toward
# a top master (syndic_master), or be a top master itself (top_master). Without either,
# the master stays on the private network only.

mock_provider "openstack" {
  source = "./tests/mocks"
}

variables {
  num_kube_nodes    = 2
  num_control_plane = 1
}

run "default_master_stays_private" {
  command = apply

  assert {
    condition     = toset(keys(module.salt_master.ports.salt)) == toset(["private"]) && length(module.salt_master.instances.salt.ports) == 1
    error_message = "without top_master the master has its private port only"
  }

  assert {
    condition     = module.salt_master.floating_ip == null && output.salt_master_floating_ip == null && !contains(keys(module.salt_master.ports.salt), "public")
    error_message = "without top_master the master has no floating IP and no public address"
  }

  assert {
    condition     = length([for name in keys(module.salt_master.rules) : name if startswith(name, "syndic-")]) == 0
    error_message = "without top_master no syndic may reach the master's Salt ports"
  }

  assert {
    condition     = toset(keys(module.salt_master.rules)) == toset(["salt", "ssh", "icmp"]) && module.salt_master.rules.salt.source == var.private_cidr
    error_message = "without top_master the master takes Salt from the private network only (and SSH, ICMP)"
  }

  assert {
    condition = yamldecode(output.salt_pillar).kos.salt_master == {
      id            = "salt.kos.internal"
      ip            = "10.20.0.10"
      floating_ip   = null
      syndic_master = null
      order_masters = false
      syndics       = []
      transport     = "zeromq"
    }
    error_message = "without syndic_master or top_master the pillar says: no top master, not a top master, no syndics, Salt's default transport"
  }

  assert {
    condition     = !strcontains(one([for file in yamldecode(nonsensitive(module.salt_master.user_data.salt)).write_files : file.content if file.path == "/usr/local/sbin/kos-firstboot"]), "configure_interface \"")
    error_message = "a master on the private network only configures no interface of its own at first boot"
  }
}

run "top_master" {
  command = apply

  variables {
    cluster_name = "top"
    top_master = {
      syndic_cidrs = ["198.51.100.7/32", "192.0.2.0/28"]
      syndics      = ["prod-eu", "staging"]
    }
  }

  assert {
    condition = {
      for name, rule in module.salt_master.rules : name => rule if startswith(name, "syndic-")
      } == {
      "syndic-198.51.100.7/32" = { protocol = "tcp", min = 4505, max = 4506, source = "198.51.100.7/32" }
      "syndic-192.0.2.0/28"    = { protocol = "tcp", min = 4505, max = 4506, source = "192.0.2.0/28" }
    }
    error_message = "a top master takes the Salt ports 4505-4506 from each syndic CIDR, exactly"
  }

  assert {
    condition     = module.salt_master.rules.salt.source == var.private_cidr
    error_message = "a top master still takes Salt from its own private network"
  }

  assert {
    condition     = output.salt_master_floating_ip == "203.0.113.12" && one(module.salt_master.ports.salt.public.fixed_ip).ip_address == "10.0.0.12"
    error_message = "a top master has a floating IP (output salt_master_floating_ip) and the public address host 12 of public_cidr"
  }

  assert {
    condition = (
      toset(keys(module.salt_master.ports.salt)) == toset(["private", "public"]) &&
      module.salt_master.ports.salt.public.network_id == module.network.public_network_id &&
      one(module.salt_master.ports.salt.public.fixed_ip).ip_address == "10.0.0.12" &&
      module.salt_master.ports.salt.public.security_group_ids == module.salt_master.ports.salt.private.security_group_ids
    )
    error_message = "a top master has a public port at 10.0.0.12 with the master's security group"
  }

  assert {
    condition     = length(module.salt_master.instances.salt.ports) == 2 && module.salt_master.instances.salt.ports[0] == module.salt_master.ports.salt.private.id && module.salt_master.instances.salt.ports[1] == module.salt_master.ports.salt.public.id
    error_message = "a top master is plugged into its private port first, then its public port"
  }

  # The floating IP answers through the public side: that side carries the default route.
  assert {
    condition = (
      strcontains(one([for file in yamldecode(nonsensitive(module.salt_master.user_data.salt)).write_files : file.content if file.path == "/usr/local/sbin/kos-firstboot"]), "configure_interface \"fa:16:3e:00:00:01\" \"default\" \"10.0.0.12\"") &&
      strcontains(one([for file in yamldecode(nonsensitive(module.salt_master.user_data.salt)).write_files : file.content if file.path == "/usr/local/sbin/kos-firstboot"]), "configure_interface \"fa:16:3e:00:00:01\" \"no-routes\" \"10.20.0.10\"")
    )
    error_message = "a top master's first boot routes by default through its public side and keeps the private side for its address only"
  }

  assert {
    condition = yamldecode(output.salt_pillar).kos.salt_master == {
      id            = "salt.kos.internal"
      ip            = "10.20.0.10"
      floating_ip   = "203.0.113.12"
      syndic_master = null
      order_masters = true
      syndics       = ["prod-eu", "staging"]
      transport     = "tcp"
    }
    error_message = "a top master's pillar carries its floating IP, order_masters and the syndics' cluster names"
  }
}

run "syndic_of_a_top_master" {
  command = apply

  variables {
    syndic_master = "salt.top.example"
  }

  assert {
    condition = (
      yamldecode(output.salt_pillar).kos.salt_master.syndic_master == "salt.top.example" &&
      yamldecode(output.salt_pillar).kos.salt_master.order_masters == false &&
      yamldecode(output.salt_pillar).kos.salt_master.floating_ip == null
    )
    error_message = "the pillar must name the top master the syndic joins (kos:salt_master:syndic_master)"
  }

  assert {
    condition = (
      yamldecode(output.salt_pillar).kos.salt_master.transport == "tcp" &&
      one([for file in yamldecode(nonsensitive(module.salt_master.user_data.salt)).write_files : yamldecode(file.content) if file.path == "/etc/salt/master.d/kos.conf"]) == { transport = "tcp" } &&
      alltrue([
        for user_data in values(nonsensitive(merge(module.nodes.user_data, module.bastion.user_data, module.salt_master.user_data))) :
        one([for file in yamldecode(user_data).write_files : yamldecode(file.content).transport if file.path == "/etc/salt/minion.d/kos.conf"]) == "tcp"
      ])
    )
    error_message = "a syndic's environment runs on Salt's tcp transport, master and every minion from first boot (Salt 3008's syndic cannot pass returns up over zeromq)"
  }

  assert {
    condition     = strcontains(one([for file in yamldecode(nonsensitive(module.salt_master.user_data.salt)).write_files : file.content if file.path == "/usr/local/sbin/kos-firstboot"]), "sh \"$script\" -X -M -S stable ${var.salt_version}")
    error_message = "the master's first boot installs salt-master and salt-syndic (-M -S) without starting them (-X)"
  }

  assert {
    condition     = !strcontains(one([for file in yamldecode(nonsensitive(module.salt_master.user_data.salt)).write_files : file.content if file.path == "/usr/local/sbin/kos-firstboot"]), "systemctl restart salt-syndic")
    error_message = "first boot never starts salt-syndic: the formula does, when the pillar names a top master"
  }

  assert {
    condition     = alltrue([for user_data in values(nonsensitive(module.nodes.user_data)) : strcontains(one([for file in yamldecode(user_data).write_files : file.content if file.path == "/usr/local/sbin/kos-firstboot"]), "sh \"$script\" -X stable ")])
    error_message = "only the master installs salt-syndic"
  }

  assert {
    condition     = toset(keys(module.salt_master.ports.salt)) == toset(["private"]) && output.salt_master_floating_ip == null
    error_message = "a syndic's master needs no public port: it reaches the top master through the bastion's NAT"
  }
}
