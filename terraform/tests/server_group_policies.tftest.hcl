# The policies chosen: a soft one where the cloud has too few hosts, none for no group.
# (A file of its own: Nova places a server in a group only when it creates it, so runs
# sharing state would keep the servers of the run before.)

mock_provider "openstack" {
  source = "./tests/mocks"
}

run "a_soft_policy_chosen_and_none" {
  command = apply

  variables {
    server_group_policies = { control_plane = "soft-anti-affinity", worker = "none" }
  }

  assert {
    condition     = keys(output.server_groups) == ["control_plane"] && output.server_groups.control_plane.policy == "soft-anti-affinity"
    error_message = "a role whose policy is none must get no group; the other the policy chosen"
  }

  assert {
    condition     = alltrue([for name, server in module.nodes.instances : (server.server_group_id == null) == startswith(name, "k8s-worker-")])
    error_message = "workers must be created outside any group when their policy is none"
  }
}
