# Bad input stops at the variable that is wrong (pytest checks the messages too).

mock_provider "openstack" {
  source = "./tests/mocks"
}

run "defaults_are_valid" {
  command = plan
}

run "bad_cidr" {
  command = plan
  variables {
    private_cidr = "10.1.0.0/33"
  }
  expect_failures = [var.private_cidr]
}

run "cidr_not_a_network_address" {
  command = plan
  variables {
    public_cidr = "10.0.3.7/16"
  }
  expect_failures = [var.public_cidr]
}

run "pod_cidr_overlaps_private" {
  command = plan
  variables {
    pod_cidr = "10.20.128.0/17"
  }
  expect_failures = [var.pod_cidr]
}

run "service_cidr_overlaps_private" {
  command = plan
  variables {
    service_cidr = "10.0.0.0/8"
  }
  expect_failures = [var.service_cidr]
}

run "even_control_plane" {
  command = plan
  variables {
    num_control_plane = 2
    num_kube_nodes    = 3
  }
  expect_failures = [var.num_control_plane]
}

run "fewer_nodes_than_control_planes" {
  command = plan
  variables {
    num_control_plane = 3
    num_kube_nodes    = 2
  }
  expect_failures = [var.num_kube_nodes]
}

run "retired_node_the_cluster_does_not_have" {
  command = plan
  variables {
    num_kube_nodes = 3
    retired_nodes  = ["k8s-worker-3"]
  }
  expect_failures = [var.retired_nodes]
}

run "retired_node_misspelt" {
  command = plan
  variables {
    retired_nodes = ["worker-1"]
  }
  expect_failures = [var.retired_nodes]
}

run "retired_first_control_plane" {
  command = plan
  variables {
    retired_nodes = ["k8s-cp-1"]
  }
  expect_failures = [var.retired_nodes]
}

run "retired_control_planes_leave_an_even_count" {
  command = plan
  variables {
    num_control_plane = 3
    num_kube_nodes    = 4
    retired_nodes     = ["k8s-cp-3"]
  }
  expect_failures = [var.retired_nodes]
}

run "workers_overlap_control_planes" {
  command = plan
  variables {
    num_control_plane   = 3
    num_kube_nodes      = 4
    worker_address_base = 22
  }
  expect_failures = [var.worker_address_base]
}

run "zero_nodes" {
  command = plan
  variables {
    num_kube_nodes = 0
  }
  expect_failures = [var.num_kube_nodes]
}

run "empty_external_network" {
  command = plan
  variables {
    external_network_name = ""
  }
  expect_failures = [var.external_network_name]
}

run "domain_not_dns_safe" {
  command = plan
  variables {
    deploy_domain_name = "Kos_Cluster.local"
  }
  expect_failures = [var.deploy_domain_name]
}

run "cluster_name_not_dns_safe" {
  command = plan
  variables {
    cluster_name = "kos cluster"
  }
  expect_failures = [var.cluster_name]
}

run "root_password_required_when_set" {
  command = plan
  variables {
    set_root_password = true
  }
  expect_failures = [var.root_password]
}

run "admin_network_needs_a_name" {
  command = plan
  variables {
    first_control_plane_access = "admin_network"
  }
  expect_failures = [var.admin_network_name]
}

run "private_key_is_not_a_public_key" {
  command = plan
  variables {
    ssh_public_keys = ["-----BEGIN OPENSSH PRIVATE KEY-----"]
  }
  expect_failures = [var.ssh_public_keys]
}

run "bad_distribution" {
  command = plan
  variables {
    kubernetes_distribution = "k3s"
  }
  expect_failures = [var.kubernetes_distribution]
}

run "syndic_master_by_address" {
  command = plan

  variables {
    syndic_master = "203.0.113.20"
  }
}

run "syndic_master_not_an_address" {
  command = plan
  variables {
    syndic_master = "not an address!"
  }
  expect_failures = [var.syndic_master]
}

run "top_master_cidr_not_a_network" {
  command = plan
  variables {
    top_master = { syndic_cidrs = ["198.51.100.7/24"] }
  }
  expect_failures = [var.top_master]
}

run "top_master_without_cidrs" {
  command = plan
  variables {
    top_master = { syndic_cidrs = [] }
  }
  expect_failures = [var.top_master]
}

run "top_master_lists_itself_as_syndic" {
  command = plan
  variables {
    top_master = { syndic_cidrs = ["198.51.100.7/32"], syndics = ["kos"] }
  }
  expect_failures = [var.top_master]
}
