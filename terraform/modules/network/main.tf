# Router on the external network; a public network behind it and a private network whose
# gateway is the bastion (not the router), so the private VMs egress through the bastion.

locals {
  # DHCP hands out the upper half of each network; the lower half is for fixed addresses.
  public_pool_start  = cidrhost(var.public_cidr, pow(2, 32 - tonumber(split("/", var.public_cidr)[1])) / 2)
  private_pool_start = cidrhost(var.private_cidr, pow(2, 32 - tonumber(split("/", var.private_cidr)[1])) / 2)
}

data "openstack_networking_network_v2" "external" {
  name     = var.external_network_name
  external = true
}

resource "openstack_networking_router_v2" "this" {
  name                = "${var.name_prefix}-router"
  admin_state_up      = true
  external_network_id = data.openstack_networking_network_v2.external.id
  tags                = var.tags
}

resource "openstack_networking_network_v2" "public" {
  name           = "${var.name_prefix}-public"
  admin_state_up = true
  tags           = var.tags
}

resource "openstack_networking_subnet_v2" "public" {
  name            = "${var.name_prefix}-public"
  network_id      = openstack_networking_network_v2.public.id
  cidr            = var.public_cidr
  ip_version      = 4
  gateway_ip      = cidrhost(var.public_cidr, 1)
  dns_nameservers = var.dns_nameservers
  tags            = var.tags

  allocation_pool {
    start = local.public_pool_start
    end   = cidrhost(var.public_cidr, -2)
  }
}

resource "openstack_networking_router_interface_v2" "public" {
  router_id = openstack_networking_router_v2.this.id
  subnet_id = openstack_networking_subnet_v2.public.id
}

resource "openstack_networking_network_v2" "private" {
  name           = "${var.name_prefix}-private"
  admin_state_up = true
  tags           = var.tags
}

resource "openstack_networking_subnet_v2" "private" {
  name            = "${var.name_prefix}-private"
  network_id      = openstack_networking_network_v2.private.id
  cidr            = var.private_cidr
  ip_version      = 4
  gateway_ip      = var.private_gateway_ip
  dns_nameservers = var.dns_nameservers
  tags            = var.tags

  allocation_pool {
    start = local.private_pool_start
    end   = cidrhost(var.private_cidr, -2)
  }
}

# The private hosts' way to the public subnet (the API load balancer's VIP): the router's own
# port, announced by DHCP as a route, while their default route stays the bastion's.
resource "openstack_networking_port_v2" "router_private" {
  count          = var.route_public_via_router ? 1 : 0
  name           = "${var.name_prefix}-router-private"
  network_id     = openstack_networking_network_v2.private.id
  admin_state_up = true
  tags           = var.tags

  fixed_ip {
    subnet_id  = openstack_networking_subnet_v2.private.id
    ip_address = var.router_private_ip
  }
}

resource "openstack_networking_router_interface_v2" "private" {
  count     = var.route_public_via_router ? 1 : 0
  router_id = openstack_networking_router_v2.this.id
  port_id   = openstack_networking_port_v2.router_private[0].id
}

resource "openstack_networking_subnet_route_v2" "public_via_router" {
  count            = var.route_public_via_router ? 1 : 0
  subnet_id        = openstack_networking_subnet_v2.private.id
  destination_cidr = var.public_cidr
  next_hop         = var.router_private_ip

  depends_on = [openstack_networking_router_interface_v2.private]
}
