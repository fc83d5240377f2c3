# The node set (modules/node_set) alone: names, addresses, zones, flavors and the map's
# validation, and the counters of a cluster described before the map.

run "the_counters_hand_out_todays_names_and_addresses" {
  command = plan
  module {
    source = "./modules/node_set"
  }
  variables {
    num_control_plane = 3
    num_kube_nodes    = 5
    retired_nodes     = ["k8s-worker-1"]
  }
  assert {
    condition = jsonencode(output.nodes) == jsonencode({
      "k8s-cp-1"     = { role = "control_plane", address = 20, az = null, flavor = null, boot_volume = null }
      "k8s-cp-2"     = { role = "control_plane", address = 21, az = null, flavor = null, boot_volume = null }
      "k8s-cp-3"     = { role = "control_plane", address = 22, az = null, flavor = null, boot_volume = null }
      "k8s-worker-2" = { role = "worker", address = 31, az = null, flavor = null, boot_volume = null }
    })
    error_message = "the counters must name and address the nodes as before the map"
  }
}

run "the_same_cluster_as_a_map_is_the_same_nodes" {
  command = plan
  module {
    source = "./modules/node_set"
  }
  variables {
    kubernetes_nodes = {
      "k8s-cp-1"     = { role = "control_plane" }
      "k8s-cp-2"     = { role = "control_plane" }
      "k8s-cp-3"     = { role = "control_plane" }
      "k8s-worker-2" = { role = "worker" }
    }
  }
  assert {
    condition     = jsonencode(output.nodes) == jsonencode(run.the_counters_hand_out_todays_names_and_addresses.nodes)
    error_message = "a map of the same names must give the same nodes (no server moves)"
  }
}

run "zones_follow_each_nodes_own_address" {
  command = plan
  module {
    source = "./modules/node_set"
  }
  variables {
    availability_zones = ["az1", "az2"]
    kubernetes_nodes = {
      "k8s-cp-1"     = { role = "control_plane" }
      "k8s-worker-1" = { role = "worker" }
      "k8s-worker-2" = { role = "worker", az = "az9" }
      "gpu-1"        = { role = "worker", address = 40, flavor = "g1.xlarge" }
    }
  }
  assert {
    condition = jsonencode(output.nodes) == jsonencode({
      "k8s-cp-1"     = { role = "control_plane", address = 20, az = "az1", flavor = null, boot_volume = null }
      "k8s-worker-1" = { role = "worker", address = 30, az = "az1", flavor = null, boot_volume = null }
      "k8s-worker-2" = { role = "worker", address = 31, az = "az9", flavor = null, boot_volume = null }
      "gpu-1"        = { role = "worker", address = 40, az = "az1", flavor = "g1.xlarge", boot_volume = null }
    })
    error_message = "a node's zone comes from itself or its own address slot; its flavor from itself"
  }
}

run "an_even_number_of_control_planes_is_refused" {
  command = plan
  module {
    source = "./modules/node_set"
  }
  variables {
    kubernetes_nodes = {
      "k8s-cp-1" = { role = "control_plane" }
      "k8s-cp-2" = { role = "control_plane" }
    }
  }
  expect_failures = [var.kubernetes_nodes]
}

run "a_map_without_the_first_control_plane_is_refused" {
  command = plan
  module {
    source = "./modules/node_set"
  }
  variables {
    kubernetes_nodes = {
      "k8s-cp-2" = { role = "control_plane" }
    }
  }
  expect_failures = [var.kubernetes_nodes]
}

run "a_worker_named_as_a_control_plane_is_refused" {
  command = plan
  module {
    source = "./modules/node_set"
  }
  variables {
    kubernetes_nodes = {
      "k8s-cp-1" = { role = "control_plane" }
      "k8s-cp-2" = { role = "worker" }
    }
  }
  expect_failures = [var.kubernetes_nodes]
}

run "another_name_needs_an_address" {
  command = plan
  module {
    source = "./modules/node_set"
  }
  variables {
    kubernetes_nodes = {
      "k8s-cp-1" = { role = "control_plane" }
      "gpu-1"    = { role = "worker" }
    }
  }
  expect_failures = [var.kubernetes_nodes]
}

run "the_map_and_the_counters_together_are_refused" {
  command = plan
  module {
    source = "./modules/node_set"
  }
  variables {
    num_kube_nodes   = 5
    kubernetes_nodes = { "k8s-cp-1" = { role = "control_plane" } }
  }
  expect_failures = [var.kubernetes_nodes]
}

run "two_nodes_on_one_address_are_refused" {
  command = plan
  module {
    source = "./modules/node_set"
  }
  variables {
    kubernetes_nodes = {
      "k8s-cp-1"     = { role = "control_plane" }
      "k8s-worker-1" = { role = "worker" }
      "gpu-1"        = { role = "worker", address = 30 }
    }
  }
  expect_failures = [output.nodes]
}

run "an_address_in_the_dhcp_pool_is_refused" {
  command = plan
  module {
    source = "./modules/node_set"
  }
  variables {
    private_cidr = "10.0.0.0/26"
    kubernetes_nodes = {
      "k8s-cp-1"     = { role = "control_plane" }
      "k8s-worker-3" = { role = "worker" }
    }
  }
  expect_failures = [output.nodes]
}

run "a_node_boots_from_its_own_volume_else_its_roles" {
  command = plan
  module {
    source = "./modules/node_set"
  }
  variables {
    boot_volumes = { control_plane = { size = 30 } }
    kubernetes_nodes = {
      "k8s-cp-1"     = { role = "control_plane" }
      "k8s-worker-1" = { role = "worker" }
      "k8s-worker-2" = { role = "worker", boot_volume = { size = 50, type = "ssd" } }
    }
  }
  assert {
    condition = jsonencode({ for name, node in output.nodes : name => node.boot_volume }) == jsonencode({
      "k8s-cp-1"     = { size = 30, type = null }
      "k8s-worker-1" = null
      "k8s-worker-2" = { size = 50, type = "ssd" }
    })
    error_message = "a node's boot_volume must override its role's; a role without one keeps the flavor's disk"
  }
}

run "a_boot_volume_of_a_fraction_of_a_gib_is_refused" {
  command = plan
  module {
    source = "./modules/node_set"
  }
  variables {
    kubernetes_nodes = {
      "k8s-cp-1"     = { role = "control_plane" }
      "k8s-worker-1" = { role = "worker", boot_volume = { size = 2.5 } }
    }
  }
  expect_failures = [var.kubernetes_nodes]
}
