# Between the nodes, the cluster security group lets in exactly what the distribution's
# datastore and pod network need, all of it derived from kubernetes_distribution.

mock_provider "openstack" {
  source = "./tests/mocks"
}

variables {
  num_kube_nodes    = 3
  num_control_plane = 1
}

run "microk8s_calico_vxlan" {
  command = apply

  variables {
    kubernetes_distribution = "microk8s"
  }

  assert {
    condition = module.nodes.cluster_rules == {
      api             = { protocol = "tcp", min = 16443, max = 16443, source = "cluster nodes" }
      kubelet         = { protocol = "tcp", min = 10250, max = 10250, source = "cluster nodes" }
      "nodeports-tcp" = { protocol = "tcp", min = 30000, max = 32767, source = "cluster nodes" }
      "nodeports-udp" = { protocol = "udp", min = 30000, max = 32767, source = "cluster nodes" }
      # the amphorae of Services of type LoadBalancer, from the private network's DHCP pool
      "nodeports-tcp-lb" = { protocol = "tcp", min = 30000, max = 32767, source = "10.20.128.0/17" }
      "nodeports-udp-lb" = { protocol = "udp", min = 30000, max = 32767, source = "10.20.128.0/17" }
      dqlite             = { protocol = "tcp", min = 19001, max = 19001, source = "cluster nodes" }
      "cluster-agent"    = { protocol = "tcp", min = 25000, max = 25000, source = "cluster nodes" }
      vxlan              = { protocol = "udp", min = 4789, max = 4789, source = "cluster nodes" }
    }
    error_message = "microk8s nodes take the API, kubelet, NodePorts (also from the load balancers), dqlite, the cluster agent and Calico's VXLAN (UDP 4789) from each other, nothing else"
  }

  # VXLAN carries pod packets between node addresses: no port carries pod or service addresses.
  assert {
    condition     = alltrue([for port in flatten([for ports in values(module.nodes.ports) : values(ports)]) : length(port.allowed_address_pairs) == 0])
    error_message = "with Calico VXLAN no node port needs the pod or service CIDR as an address pair"
  }
}

run "kubeadm_kube_router_routed" {
  command = apply

  variables {
    kubernetes_distribution = "kubeadm"
  }

  assert {
    condition = module.nodes.cluster_rules == {
      api                = { protocol = "tcp", min = 6443, max = 6443, source = "cluster nodes" }
      kubelet            = { protocol = "tcp", min = 10250, max = 10250, source = "cluster nodes" }
      "nodeports-tcp"    = { protocol = "tcp", min = 30000, max = 32767, source = "cluster nodes" }
      "nodeports-udp"    = { protocol = "udp", min = 30000, max = 32767, source = "cluster nodes" }
      "nodeports-tcp-lb" = { protocol = "tcp", min = 30000, max = 32767, source = "10.20.128.0/17" }
      "nodeports-udp-lb" = { protocol = "udp", min = 30000, max = 32767, source = "10.20.128.0/17" }
      etcd               = { protocol = "tcp", min = 2379, max = 2380, source = "cluster nodes" }
      bgp                = { protocol = "tcp", min = 179, max = 179, source = "cluster nodes" }
      "kube-router-hc"   = { protocol = "tcp", min = 20244, max = 20244, source = "cluster nodes" }
      pods               = { protocol = null, min = null, max = null, source = var.pod_cidr }
    }
    error_message = "kubeadm nodes take the API, kubelet, NodePorts (also from the load balancers), etcd, kube-router's BGP and health port, and routed pod traffic from each other, nothing else"
  }

  assert {
    condition = alltrue([
      for port in flatten([for ports in values(module.nodes.ports) : values(ports)]) :
      toset([for pair in port.allowed_address_pairs : pair.ip_address]) == toset([var.pod_cidr, var.service_cidr])
    ])
    error_message = "kube-router routes pod and service addresses: every node port must allow them as address pairs"
  }

  # The cloud controller finds servers by the provider ID the kubelets register
  # (openstack:///<UUID>), so server names stay unique across clusters of one project.
  assert {
    condition     = alltrue([for name, server in module.nodes.instances : server.name == "kos-${name}"])
    error_message = "node servers must be named <cluster>-<host>: unique in a project several clusters share"
  }
}

run "default_private_network_clear_of_every_pod_and_service_network" {
  command = plan

  assert {
    condition = alltrue([
      for cidr in ["10.1.0.0/16", "10.152.183.0/24", "10.244.0.0/16", "10.96.0.0/12", "192.168.0.0/16"] :
      !(cidrsubnet("${cidrhost(cidr, 0)}/${split("/", var.private_cidr)[1]}", 0, 0) == var.private_cidr ||
      cidrsubnet("${cidrhost(var.private_cidr, 0)}/${split("/", cidr)[1]}", 0, 0) == cidr)
    ])
    error_message = "the default private_cidr must not overlap microk8s's, kubeadm's or Calico's default pod and service networks"
  }
}
