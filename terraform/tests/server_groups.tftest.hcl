# Placement: a server group of the cluster's own per role, control planes apart on
# distinct hosts by default, workers apart where Nova can.

mock_provider "openstack" {
  source = "./tests/mocks"
}

run "each_role_gets_its_server_group" {
  command = apply

  variables {
    cluster_name = "kos"
    kubernetes_nodes = {
      "k8s-cp-1"     = { role = "control_plane" }
      "k8s-cp-2"     = { role = "control_plane" }
      "k8s-cp-3"     = { role = "control_plane" }
      "k8s-worker-1" = { role = "worker" }
    }
  }

  assert {
    condition = jsonencode({ for role, group in output.server_groups : role => [group.name, group.policy, group.members] }) == jsonencode({
      control_plane = ["kos-control-plane", "anti-affinity", ["k8s-cp-1", "k8s-cp-2", "k8s-cp-3"]]
      worker        = ["kos-worker", "soft-anti-affinity", ["k8s-worker-1"]]
    })
    error_message = "control planes must default to anti-affinity and workers to soft-anti-affinity, each role in its own group"
  }

  assert {
    condition = alltrue([
      for name, server in module.nodes.instances :
      server.server_group_id == output.server_groups[startswith(name, "k8s-cp-") ? "control_plane" : "worker"].id
    ])
    error_message = "every node must be created in its role's server group"
  }
}
