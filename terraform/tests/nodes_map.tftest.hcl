# Nodes written as a map by name (kubernetes_nodes): the same cluster as the counters that
# described it before, per-node flavors, and entries that come and go without moving the
# others.

mock_provider "openstack" {
  source = "./tests/mocks"
}

variables {
  availability_zones = ["az-a", "az-b"]
}

run "a_cluster_described_by_the_counters" {
  command = apply

  variables {
    num_control_plane = 3
    num_kube_nodes    = 6
    retired_nodes     = ["k8s-worker-2"]
  }
}

# The migration: the map of the names the counters handed out plans the same servers,
# addresses and zones, so an existing cluster keeps every server.
run "the_same_names_as_a_map_are_the_same_cluster" {
  command = apply

  variables {
    kubernetes_nodes = {
      "k8s-cp-1"     = { role = "control_plane" }
      "k8s-cp-2"     = { role = "control_plane" }
      "k8s-cp-3"     = { role = "control_plane" }
      "k8s-worker-1" = { role = "worker" }
      "k8s-worker-3" = { role = "worker" }
    }
  }

  assert {
    condition     = jsonencode(output.kubernetes_nodes) == jsonencode(run.a_cluster_described_by_the_counters.kubernetes_nodes)
    error_message = "the map of the counters' names must give the same nodes, addresses and zones"
  }

  assert {
    condition     = toset(keys(module.nodes.instances)) == toset(["k8s-cp-1", "k8s-cp-2", "k8s-cp-3", "k8s-worker-1", "k8s-worker-3"])
    error_message = "one server per entry of the map, keyed by its name as with the counters"
  }
}

run "a_node_can_name_its_flavor_zone_and_address" {
  command = apply

  variables {
    kube_node_flavor = "m1.large"
    kubernetes_nodes = {
      "k8s-cp-1"     = { role = "control_plane" }
      "k8s-worker-1" = { role = "worker", az = "az-b" }
      "gpu-1"        = { role = "worker", flavor = "g1.xlarge", address = 50 }
    }
  }

  assert {
    condition = { for name, server in module.nodes.instances : name => server.flavor_name } == {
      "k8s-cp-1"     = "m1.large"
      "k8s-worker-1" = "m1.large"
      "gpu-1"        = "g1.xlarge"
    }
    error_message = "a node's own flavor must win over kube_node_flavor, which the others get"
  }

  assert {
    condition = {
      for id, node in output.kubernetes_nodes : id => [node.private_ip, node.availability_zone, node.role]
      } == {
      "k8s-cp-1.kos.internal"     = ["10.20.0.20", "az-a", "control_plane"]
      "k8s-worker-1.kos.internal" = ["10.20.0.30", "az-b", "worker"]
      "gpu-1.kos.internal"        = ["10.20.0.50", "az-a", "worker"]
    }
    error_message = "a node's own zone and address must be used; other names get their slot's"
  }
}

run "an_entry_removed_and_another_added_move_no_one" {
  command = apply

  variables {
    kubernetes_nodes = {
      "k8s-cp-1"     = { role = "control_plane" }
      "k8s-cp-2"     = { role = "control_plane" }
      "k8s-cp-3"     = { role = "control_plane" }
      "k8s-worker-3" = { role = "worker" }
      "k8s-worker-4" = { role = "worker" }
    }
  }

  assert {
    condition = alltrue([
      for id, node in output.kubernetes_nodes :
      node == run.a_cluster_described_by_the_counters.kubernetes_nodes[id] if contains(keys(run.a_cluster_described_by_the_counters.kubernetes_nodes), id)
    ])
    error_message = "nodes in both maps must keep their address and zone"
  }

  assert {
    condition     = output.kubernetes_nodes["k8s-worker-4.kos.internal"].private_ip == "10.20.0.33"
    error_message = "a new k8s-worker-4 must get its own name's address"
  }
}
