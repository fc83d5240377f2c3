# Root disks as Cinder volumes (boot_volumes per role, boot_volume per node): made from the
# image, deleted with their server; the other nodes keep the flavor's disk.

mock_provider "openstack" {
  source = "./tests/mocks"
}

run "workers_boot_from_volumes_and_a_node_sizes_its_own" {
  command = apply

  variables {
    boot_volumes = { worker = { size = 20 } }
    kubernetes_nodes = {
      "k8s-cp-1"     = { role = "control_plane" }
      "k8s-worker-1" = { role = "worker" }
      "k8s-worker-2" = { role = "worker", boot_volume = { size = 40, type = "fast" } }
    }
  }

  assert {
    condition = (
      module.nodes.instances["k8s-cp-1"].boot_volume == null && module.nodes.instances["k8s-cp-1"].image_name == "ubuntu-24.04"
      && module.nodes.instances["k8s-worker-1"].boot_volume.size == 20
      && module.nodes.instances["k8s-worker-2"].boot_volume.size == 40
      && module.nodes.instances["k8s-worker-2"].boot_volume.type == "fast"
    )
    error_message = "a node with a boot volume must boot from it, the others from the image"
  }
}

run "control_planes_too_from_the_role" {
  command = apply

  variables {
    boot_volumes      = { control_plane = { size = 30, type = "ssd" } }
    num_control_plane = 3
    num_kube_nodes    = 4
  }

  assert {
    condition     = alltrue([for name in ["k8s-cp-1", "k8s-cp-2", "k8s-cp-3"] : module.nodes.instances[name].boot_volume.size == 30 && module.nodes.instances[name].boot_volume.type == "ssd"])
    error_message = "the counters' control planes must take their role's boot volume"
  }

  assert {
    condition     = module.nodes.instances["k8s-worker-1"].boot_volume == null
    error_message = "workers must keep the flavor's disk when their role names no boot volume"
  }
}

run "a_boot_volume_of_no_size_is_refused" {
  command = plan

  variables {
    boot_volumes = { worker = { size = 0 } }
  }

  expect_failures = [var.boot_volumes]
}
