# Values the real provider would compute, so plans and outputs can be checked offline.
# Everything else computed gets Terraform's generated mock values.

mock_data "openstack_networking_network_v2" {
  defaults = {
    id = "00000000-0000-4000-8000-0000000000e1"
  }
}

mock_resource "openstack_networking_port_v2" {
  defaults = {
    mac_address   = "fa:16:3e:00:00:01"
    all_fixed_ips = ["192.0.2.50"]
  }
}

mock_resource "openstack_networking_floatingip_v2" {
  defaults = {
    address = "203.0.113.99"
  }
}

mock_resource "openstack_blockstorage_volume_v3" {
  defaults = {
    id = "5e9a6c1d-7f3b-4c2a-9d8e-0123456789ab"
  }
}

# One floating IP per role, so outputs and pillar can be told apart.
override_resource {
  target = module.bastion.module.server.openstack_networking_floatingip_v2.this
  values = { address = "203.0.113.10" }
}

override_resource {
  target = module.nodes.module.server.openstack_networking_floatingip_v2.this
  values = { address = "203.0.113.11" }
}

override_resource {
  target = module.salt_master.module.server.openstack_networking_floatingip_v2.this
  values = { address = "203.0.113.12" }
}
