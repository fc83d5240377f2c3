# What the bootstrapper reads with `terraform output -json`, and the pillar the master gets.

mock_provider "openstack" {
  source = "./tests/mocks"
}

variables {
  deploy_domain_name = "example.internal"
  num_kube_nodes     = 2
  num_control_plane  = 1
  availability_zones = ["az-a"]
  users = [
    { name = "alice", ssh_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAliceKeyForTests alice@laptop"], sudo = true },
    { name = "bob" },
  ]
}

run "bootstrapper_outputs" {
  command = apply

  assert {
    condition     = output.bastion_floating_ip == "203.0.113.10" && output.api_floating_ip == "203.0.113.11" && output.salt_master_floating_ip == null
    error_message = "bastion_floating_ip and api_floating_ip must be the floating IPs' addresses; salt_master_floating_ip is null unless the master is a top master"
  }

  assert {
    condition     = output.salt_master_private_ip == "10.20.0.10" && output.ssh_user == "kos" && output.cluster_name == "kos"
    error_message = "salt_master_private_ip, ssh_user or cluster_name is wrong"
  }

  assert {
    condition = output.minions == {
      "salt.example.internal"         = { hostname = "salt", role = "salt_master", private_ip = "10.20.0.10" }
      "bastion.example.internal"      = { hostname = "bastion", role = "bastion", private_ip = "10.20.0.1" }
      "k8s-cp-1.example.internal"     = { hostname = "k8s-cp-1", role = "control_plane", private_ip = "10.20.0.20" }
      "k8s-worker-1.example.internal" = { hostname = "k8s-worker-1", role = "worker", private_ip = "10.20.0.30" }
    }
    error_message = "minions must map every minion id to hostname, role and private_ip"
  }

  assert {
    condition = output.kubernetes_nodes == {
      "k8s-cp-1.example.internal"     = { role = "control_plane", private_ip = "10.20.0.20", floating_ip = "203.0.113.11", availability_zone = "az-a" }
      "k8s-worker-1.example.internal" = { role = "worker", private_ip = "10.20.0.30", floating_ip = null, availability_zone = "az-a" }
    }
    error_message = "kubernetes_nodes must map every node id to role, private_ip, floating_ip and availability_zone"
  }

  assert {
    condition = yamldecode(output.salt_pillar) == {
      kos = {
        distribution = "microk8s"
        cluster_name = "kos"
        domain       = "example.internal"
        deploy_user  = "kos"
        networks = {
          public_cidr  = "10.0.0.0/16"
          private_cidr = "10.20.0.0/16"
          pod_cidr     = "10.244.0.0/16"
          service_cidr = "10.96.0.0/12"
          # the mock's ID of the public subnet
          public_subnet_id  = module.network.public_subnet_id
          private_subnet_id = module.network.private_subnet_id
        }
        salt_master = { id = "salt.example.internal", ip = "10.20.0.10", floating_ip = null, syndic_master = null, order_masters = false, syndics = [], transport = "zeromq" }
        bastion     = { id = "bastion.example.internal", ip = "10.20.0.1", public_ip = "10.0.0.10", floating_ip = "203.0.113.10" }
        nodes = {
          "k8s-cp-1.example.internal"     = { role = "control_plane", ip = "10.20.0.20", availability_zone = "az-a", floating_ip = "203.0.113.11" }
          "k8s-worker-1.example.internal" = { role = "worker", ip = "10.20.0.30", availability_zone = "az-a", floating_ip = null }
        }
        first_control_plane = "k8s-cp-1.example.internal"
        api                 = { load_balancer = "none", vip = null, floating_ip = "203.0.113.11", admin_ip = null }
      }
      core = {
        users = [
          { name = "alice", ssh_keys = ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAliceKeyForTests alice@laptop"], sudo = true },
          { name = "bob", ssh_keys = [], sudo = false },
        ]
      }
    }
    error_message = "salt_pillar must decode to the pillar shape the Salt states read"
  }

  assert {
    condition     = one([for file in yamldecode(nonsensitive(module.salt_master.user_data.salt)).write_files : file.content if file.path == "/srv/pillar/_from_terraform.sls"]) == output.salt_pillar
    error_message = "the master's cloud-init must write exactly the salt_pillar output to /srv/pillar/_from_terraform.sls"
  }
}

run "kubeadm_distribution" {
  command = apply

  variables {
    kubernetes_distribution = "kubeadm"
    cluster_name            = "prod-eu"
  }

  assert {
    condition     = yamldecode(output.salt_pillar).kos.distribution == "kubeadm" && !contains(keys(yamldecode(output.salt_pillar)), "kubernetes") && yamldecode(output.salt_pillar).kos.cluster_name == "prod-eu"
    error_message = "the pillar must carry the distribution as kos:distribution alone (the validator rejects the older kubernetes:distribution) and the cluster name"
  }

  assert {
    condition     = module.bastion.instances.bastion.name == "prod-eu-bastion" && module.nodes.instances["k8s-cp-1"].name == "prod-eu-k8s-cp-1"
    error_message = "OpenStack names must start with the cluster name"
  }
}
