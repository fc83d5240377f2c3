# The API endpoint: an Octavia load balancer in front of the control planes
# (api_load_balancer = "octavia"), or each node's local haproxy and k8s-cp-1's floating IP
# for clouds without Octavia ("none").

mock_provider "openstack" {
  source = "./tests/mocks"
}

variables {
  kubernetes_distribution = "kubeadm"
  num_control_plane       = 3
  num_kube_nodes          = 4
  api_allowed_cidrs       = ["192.0.2.0/24"]
}

run "none_keeps_the_first_control_plane_as_the_entry" {
  command = apply

  variables {
    api_load_balancer = "none"
  }

  assert {
    condition     = output.api_load_balancer == null && output.api_floating_ip == "203.0.113.11"
    error_message = "without a load balancer operators reach the API at k8s-cp-1's floating IP"
  }

  assert {
    condition     = yamldecode(output.salt_pillar).kos.api == { load_balancer = "none", vip = null, floating_ip = "203.0.113.11", admin_ip = null }
    error_message = "without a load balancer the pillar names no VIP (each node's local haproxy is the cluster's endpoint)"
  }

  assert {
    condition     = module.network.router_private_port == null && module.network.public_route == null
    error_message = "without a load balancer the private subnet keeps the bastion as its only way out"
  }

  assert {
    condition     = length(module.api_lb) == 0 && !anytrue([for name in keys(module.nodes.cluster_rules) : startswith(name, "api-lb-")])
    error_message = "api_load_balancer = none creates no load balancer and opens nothing for one"
  }

  assert {
    condition     = contains(keys(module.nodes.edge_rules), "api-192.0.2.0/24")
    error_message = "without a load balancer k8s-cp-1's outside port takes the API from api_allowed_cidrs"
  }
}

run "octavia_fronts_every_control_plane" {
  command = apply

  variables {
    api_load_balancer = "octavia"
  }

  # 203.0.113.99: the mock's floating IP address where no override names one.
  assert {
    condition     = module.api_lb[0].vip == "10.0.0.9" && output.api_floating_ip == "203.0.113.99" && output.api_load_balancer.floating_ip == "203.0.113.99"
    error_message = "the load balancer's VIP is host 9 of public_cidr (a floating IP needs the router) and operators reach the API at its floating IP"
  }

  assert {
    condition = output.api_load_balancer.members == {
      "k8s-cp-1" = "10.20.0.20:6443"
      "k8s-cp-2" = "10.20.0.21:6443"
      "k8s-cp-3" = "10.20.0.22:6443"
    }
    error_message = "the pool holds every control plane, and only them, on kubeadm's API port"
  }

  assert {
    condition     = yamldecode(output.salt_pillar).kos.api == { load_balancer = "octavia", vip = "10.0.0.9", floating_ip = "203.0.113.99", admin_ip = null }
    error_message = "the pillar names the VIP (the cluster's own endpoint) and the load balancer's floating IP (the certificates carry both)"
  }

  assert {
    condition     = toset(module.api_lb[0].listener.allowed_cidrs) == toset(["10.20.0.0/16", "10.0.0.11/32", "192.0.2.0/24"]) && module.api_lb[0].listener.protocol_port == 6443
    error_message = "the listener takes the private network and k8s-cp-1's public address (the nodes' own clients) and api_allowed_cidrs, nothing else"
  }

  assert {
    condition     = module.api_lb[0].listener.timeout_client_data >= 3600000 && module.api_lb[0].listener.timeout_member_data >= 3600000
    error_message = "idle API connections (watches, logs -f, exec) must outlive Octavia's 50 s default"
  }

  assert {
    condition     = module.network.router_private_port.fixed_ip[0].ip_address == "10.20.0.2" && module.network.public_route == { destination_cidr = "10.0.0.0/16", next_hop = "10.20.0.2" }
    error_message = "the nodes reach the VIP through the router's port on the private subnet (host 2), announced as a route to public_cidr, not through the bastion"
  }

  assert {
    condition     = module.api_lb[0].monitor.type == "TCP" && module.api_lb[0].monitor.delay * module.api_lb[0].monitor.max_retries_down <= 10
    error_message = "a stopped control plane must leave the pool within about 10 s"
  }

  assert {
    condition     = module.nodes.cluster_rules["api-lb-10.20.128.0/17"] == { protocol = "tcp", min = 6443, max = 6443, source = "10.20.128.0/17" }
    error_message = "the control planes take the API from the amphorae's addresses (the DHCP pool, upper half of private_cidr)"
  }

  assert {
    condition     = !anytrue([for name in keys(module.nodes.edge_rules) : startswith(name, "api-")])
    error_message = "with a load balancer the API is not open on k8s-cp-1's outside port"
  }
}

run "retired_control_planes_leave_the_pool" {
  command = apply

  variables {
    api_load_balancer = "octavia"
    num_control_plane = 5
    num_kube_nodes    = 6
    retired_nodes     = ["k8s-cp-2", "k8s-cp-4"]
  }

  assert {
    condition = output.api_load_balancer.members == {
      "k8s-cp-1" = "10.20.0.20:6443"
      "k8s-cp-3" = "10.20.0.22:6443"
      "k8s-cp-5" = "10.20.0.24:6443"
    }
    error_message = "a retired control plane leaves the pool; the others keep their members"
  }
}

run "octavia_microk8s_port" {
  command = apply

  variables {
    api_load_balancer       = "octavia"
    kubernetes_distribution = "microk8s"
    num_control_plane       = 1
    num_kube_nodes          = 3
  }

  assert {
    condition     = output.api_load_balancer.members == { "k8s-cp-1" = "10.20.0.20:16443" } && module.api_lb[0].listener.protocol_port == 16443
    error_message = "microk8s's API port (16443) on the VIP and on every member"
  }
}

run "ovn_keeps_the_client_address" {
  command = apply

  variables {
    api_load_balancer          = "octavia"
    api_load_balancer_provider = "ovn"
  }

  assert {
    condition     = contains(keys(module.nodes.cluster_rules), "api-lb-192.0.2.0/24") && module.api_lb[0].loadbalancer.loadbalancer_provider == "ovn"
    error_message = "OVN's load balancer keeps the client's address: the control planes must take api_allowed_cidrs on the API port"
  }

  # (allowed_cidrs and the timeouts, left unset for OVN, are computed: the mock fills them)
  assert {
    condition     = module.api_lb[0].pool.lb_method == "SOURCE_IP_PORT"
    error_message = "OVN's provider balances by SOURCE_IP_PORT only"
  }
}

run "unknown_choice_is_refused" {
  command = plan

  variables {
    api_load_balancer = "haproxy"
  }

  expect_failures = [var.api_load_balancer]
}

run "provider_name_is_checked" {
  command = plan

  variables {
    api_load_balancer          = "octavia"
    api_load_balancer_provider = "Amphora Fast"
  }

  expect_failures = [var.api_load_balancer_provider]
}
