# The Kubernetes API behind an Octavia load balancer: a VIP at a fixed address for the
# cluster's own clients (kubelets, kube-proxy, the CNI, joining nodes), a floating IP on it
# for operators, and a pool of every control plane with a health monitor. Adding or
# retiring a control plane changes the pool's member set in one update.

resource "openstack_lb_loadbalancer_v2" "api" {
  name                  = "${var.name_prefix}-api"
  description           = "kos: the Kubernetes API of ${var.name_prefix}"
  vip_subnet_id         = var.vip_subnet_id
  vip_address           = var.vip_address
  loadbalancer_provider = var.provider_name
  tags                  = var.tags
}

# OVN's provider has neither a listener's allowed_cidrs nor its timeouts, and balances by
# SOURCE_IP_PORT only (cloud-provider-openstack pkg/util/openstack/loadbalancer.go,
# IsOctaviaFeatureSupported); it keeps the client's address, so the control planes'
# security group limits who reaches the API instead.
locals {
  ovn = var.provider_name == "ovn"
}

resource "openstack_lb_listener_v2" "api" {
  name            = "${var.name_prefix}-api"
  loadbalancer_id = openstack_lb_loadbalancer_v2.api.id
  protocol        = "TCP"
  protocol_port   = var.port
  allowed_cidrs   = local.ovn ? null : var.allowed_cidrs
  # Octavia closes a connection idle for 50 s by default, which cuts kubectl's watches,
  # logs -f and exec sessions; the API server ends its own watches well within an hour.
  timeout_client_data = local.ovn ? null : 3600000
  timeout_member_data = local.ovn ? null : 3600000
  # A stopped control plane answers no SYN: Octavia's haproxy waits this long before it
  # tries again and, on its last retry, another member (its template's "retries 3" and
  # "option redispatch"). At Octavia's default 5 s a request the dead member drew waited
  # past kubectl's patience until the health monitor took it out.
  timeout_member_connect = local.ovn ? null : 1000
  tags                   = var.tags
}

resource "openstack_lb_pool_v2" "api" {
  name        = "${var.name_prefix}-api"
  listener_id = openstack_lb_listener_v2.api.id
  protocol    = "TCP"
  lb_method   = local.ovn ? "SOURCE_IP_PORT" : "ROUND_ROBIN"
}

# A stopped control plane is out of the pool after two failed checks (about 10 s) and back
# after two good ones. TCP, not HTTPS: the check must not depend on the API server letting
# anonymous requests read /readyz.
resource "openstack_lb_monitor_v2" "api" {
  name             = "${var.name_prefix}-api"
  pool_id          = openstack_lb_pool_v2.api.id
  type             = "TCP"
  delay            = 5
  timeout          = 4
  max_retries      = 2
  max_retries_down = 2
}

# After the monitor: Octavia takes one change to a load balancer at a time, and a members
# update sent while the monitor's create was in flight failed (Octavia Zed answered 400,
# "TCP is not a valid option for type", from a database error).
resource "openstack_lb_members_v2" "api" {
  pool_id    = openstack_lb_pool_v2.api.id
  depends_on = [openstack_lb_monitor_v2.api]

  dynamic "member" {
    for_each = var.members
    content {
      name          = member.key
      address       = member.value
      protocol_port = var.port
      subnet_id     = var.member_subnet_id
    }
  }
}

# Allocated apart from the load balancer and associated once it exists: its address goes
# into the pillar the master boots with, and the master need not wait for Octavia.
resource "openstack_networking_floatingip_v2" "api" {
  pool        = var.external_network_name
  description = "kos: the Kubernetes API of ${var.name_prefix}"
  tags        = var.tags
}

resource "openstack_networking_floatingip_associate_v2" "api" {
  floating_ip = openstack_networking_floatingip_v2.api.address
  port_id     = openstack_lb_loadbalancer_v2.api.vip_port_id
}
