# cloud-init: valid YAML, hostname/FQDN/minion id, the master's address, /etc/hosts, and no
# secret unless set_root_password is true (and then only a hash, never the password).

mock_provider "openstack" {
  source = "./tests/mocks"
}

variables {
  num_kube_nodes    = 2
  num_control_plane = 1
  root_password     = "Correct-Horse-Battery-Staple-42"
}

run "minion_settings" {
  command = apply

  assert {
    condition = alltrue([
      for name, user_data in nonsensitive(merge(module.nodes.user_data, module.bastion.user_data, module.salt_master.user_data)) :
      startswith(user_data, "#cloud-config\n") &&
      yamldecode(user_data).hostname == name &&
      yamldecode(user_data).fqdn == "${name}.kos.internal" &&
      one([for file in yamldecode(user_data).write_files : yamldecode(file.content) if file.path == "/etc/salt/minion.d/kos.conf"]) == { id = "${name}.kos.internal", master = "10.20.0.10", rejected_retry = true, transport = "zeromq", acceptance_wait_time = 2 } &&
      strcontains(one([for file in yamldecode(user_data).write_files : file.content if file.path == "/etc/hosts"]), "10.20.0.10 salt.kos.internal salt\n") &&
      strcontains(yamldecode(user_data).final_message, "kos: cloud-init finished on ${name}.kos.internal")
    ])
    error_message = "every VM's cloud-config must set hostname, FQDN, minion id, the master's address and transport (Salt's default, zeromq, without a master of masters), /etc/hosts and the final line"
  }

  assert {
    condition     = one([for file in yamldecode(nonsensitive(module.salt_master.user_data.salt)).write_files : yamldecode(file.content) if file.path == "/etc/salt/master.d/kos.conf"]) == { transport = "zeromq" }
    error_message = "the master's first boot must start it on its minions' transport (the salt_master formula takes the file over)"
  }

  assert {
    condition = alltrue([
      for name, user_data in nonsensitive(merge(module.nodes.user_data, module.bastion.user_data, module.salt_master.user_data)) :
      strcontains(one([for file in yamldecode(user_data).write_files : file.content if file.path == "/usr/local/sbin/kos-firstboot"]), "echo \"kos-trust: ${name}.kos.internal salt-minion-key sha256 $finger\"") &&
      strcontains(one([for file in yamldecode(user_data).write_files : file.content if file.path == "/usr/local/sbin/kos-firstboot"]), "echo \"kos-trust: ${name}.kos.internal ssh-host-key $kind $blob\"")
    ])
    error_message = "every VM's first boot must print its minion key fingerprint and SSH host keys on the console, naming its own minion id (kos verifies keys against them)"
  }

  assert {
    condition     = strcontains(one([for file in yamldecode(nonsensitive(module.salt_master.user_data.salt)).write_files : file.content if file.path == "/usr/local/sbin/kos-firstboot"]), "mount_state_volume \"5e9a6c1d-7f3b-4c2a-9\"")
    error_message = "the master must mount its state volume (found by its serial) before installing Salt"
  }

  assert {
    condition     = one([for user in yamldecode(nonsensitive(module.bastion.user_data.bastion)).users : tolist(user.ssh_authorized_keys) if user.name == "kos"]) == var.ssh_public_keys
    error_message = "deploy_user must get ssh_public_keys"
  }
}

run "no_secret_without_set_root_password" {
  command = apply

  variables {
    set_root_password = false
  }

  assert {
    condition = alltrue([
      for user_data in values(nonsensitive(merge(module.nodes.user_data, module.bastion.user_data, module.salt_master.user_data))) :
      !strcontains(user_data, var.root_password) && !strcontains(user_data, "chpasswd") && !strcontains(user_data, "$2a$") && !can(yamldecode(user_data).chpasswd)
    ])
    error_message = "user data must hold no password unless set_root_password is true"
  }

  assert {
    condition     = !strcontains(output.salt_pillar, var.root_password)
    error_message = "the pillar must never hold the root password"
  }
}

run "root_password_console_only" {
  command = apply

  variables {
    set_root_password = true
  }

  assert {
    condition = alltrue([
      for user_data in values(nonsensitive(merge(module.nodes.user_data, module.bastion.user_data, module.salt_master.user_data))) :
      !strcontains(user_data, var.root_password) &&
      yamldecode(user_data).ssh_pwauth == false &&
      length([for user in yamldecode(user_data).chpasswd.users : user if user.name == "root" && user.type == "hash" && startswith(user.password, "$2")]) == 1
    ])
    error_message = "with set_root_password, every VM gets root's bcrypt hash (never the password) and SSH password login stays off"
  }

  assert {
    condition     = !strcontains(output.salt_pillar, var.root_password) && !strcontains(jsonencode(output.minions), var.root_password)
    error_message = "outputs must never hold the root password"
  }
}
