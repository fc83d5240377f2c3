# Thin root: computes the addressing plan and wires the modules together.
#
# Private addresses are fixed (cidrhost) rather than left to DHCP because the pillar
# rendered into the Salt master's user data must name every node before anything boots.
# Fixed addresses live in the lower half of each network; DHCP's pool is the upper half.

locals {
  domain = var.deploy_domain_name
  tags   = ["kos", "kos-cluster=${var.cluster_name}"]

  # microk8s serves the API on 16443, kubeadm on 6443.
  api_port = var.kubernetes_distribution == "microk8s" ? 16443 : 6443

  # The bastion holds the private network's gateway address: it NATs the private network.
  bastion_private_ip = cidrhost(var.private_cidr, 1)
  bastion_public_ip  = cidrhost(var.public_cidr, 10)
  salt_master_ip     = cidrhost(var.private_cidr, 10)
  # Only a top master (var.top_master) has a public port.
  salt_master_public_ip = cidrhost(var.public_cidr, 12)

  first_cp_on_public = var.first_control_plane_access == "floating_ip"
  first_cp_public_ip = cidrhost(var.public_cidr, 11)

  # The API load balancer's VIP: a fixed address, so the pillar can name it before boot. On
  # the public subnet: a floating IP needs its port's subnet on the router, and an amphora
  # answers through its VIP subnet's gateway, which on the private subnet is the bastion.
  # The nodes reach the VIP from their private addresses through the router's own port on
  # the private subnet (a route DHCP announces), never through the bastion.
  api_vip_ip        = cidrhost(var.public_cidr, 9)
  router_private_ip = cidrhost(var.private_cidr, 2)
  octavia           = var.api_load_balancer == "octavia"
  api_allowed_cidrs = coalesce(var.api_allowed_cidrs, var.ssh_allowed_cidrs)
  # Where load balancers reach the nodes from. An amphora speaks from its own port, which
  # DHCP addresses from the pool in the upper half of the private network (the salt master
  # and the bastion sit in the lower half).
  load_balancer_cidr = cidrsubnet(var.private_cidr, 1, 1)
  # OVN's load balancer keeps the client's address, so the API's outside sources are let in
  # too.
  api_load_balancer_sources = !local.octavia ? [] : concat(
    [local.load_balancer_cidr],
    var.api_load_balancer_provider == "ovn" ? local.api_allowed_cidrs : [],
  )

  # The nodes by name (modules/node_set, which kos evaluates too): a node's address and zone
  # follow from its own name, never from the others', so adding, retiring or adding control
  # planes never moves another node.
  kube_nodes = {
    for name, node in module.node_set.nodes : name => {
      role              = node.role
      private_ip        = cidrhost(var.private_cidr, node.address)
      availability_zone = node.az
      flavor_name       = coalesce(node.flavor, var.kube_node_flavor)
      boot_volume       = node.boot_volume
      public_ip         = name == local.first_control_plane && local.first_cp_on_public ? local.first_cp_public_ip : null
      floating_ip       = name == local.first_control_plane && local.first_cp_on_public
      admin_network     = name == local.first_control_plane && !local.first_cp_on_public
    }
  }
  first_control_plane = "k8s-cp-1"

  # Salt's transport, for the master and every minion of this environment. A master of
  # masters runs on tcp: Salt 3008's salt-syndic cannot pass returns up over zeromq (its
  # synchronous request channel times out; measured with 3008.3, unchanged in 3008.5),
  # and a syndic talks to its top over its own master's transport.
  salt_transport = var.syndic_master != null || var.top_master != null ? "tcp" : "zeromq"

  # Only a bcrypt hash goes to the VMs, and only when asked for.
  root_password_hash = var.set_root_password ? bcrypt(var.root_password) : null

  cloud_init = {
    domain                = local.domain
    salt_master_ip        = local.salt_master_ip
    salt_transport        = local.salt_transport
    deploy_user           = var.deploy_user
    ssh_public_keys       = var.ssh_public_keys
    salt_version          = var.salt_version
    salt_bootstrap_url    = var.salt_bootstrap_url
    salt_bootstrap_sha256 = var.salt_bootstrap_sha256
    hosts = {
      salt    = local.salt_master_ip
      bastion = local.bastion_private_ip
    }
  }
}

# What every server shares, handed whole to each role's module and from there to
# modules/server. The networks apart: what does not need them (security groups, the master's
# volume) need not wait for them.
locals {
  cluster = {
    name_prefix           = var.cluster_name
    tags                  = local.tags
    image_name            = var.base_image
    external_network_name = var.external_network_name
    cloud_init            = local.cloud_init
  }
  networks = {
    private = { network_id = module.network.private_network_id, subnet_id = module.network.private_subnet_id }
    public  = { network_id = module.network.public_network_id, subnet_id = module.network.public_subnet_id }
  }
}

module "node_set" {
  source = "./modules/node_set"

  kubernetes_nodes    = var.kubernetes_nodes
  num_control_plane   = var.num_control_plane
  num_kube_nodes      = var.num_kube_nodes
  worker_address_base = var.worker_address_base
  retired_nodes       = var.retired_nodes
  availability_zones  = var.availability_zones
  boot_volumes        = var.boot_volumes
  private_cidr        = var.private_cidr
}

module "network" {
  source = "./modules/network"

  name_prefix           = var.cluster_name
  tags                  = local.tags
  external_network_name = var.external_network_name
  public_cidr           = var.public_cidr
  private_cidr          = var.private_cidr
  private_gateway_ip    = local.bastion_private_ip
  dns_nameservers       = var.dns_nameservers
  # the nodes' way to the API load balancer's VIP
  route_public_via_router = local.octavia
  router_private_ip       = local.router_private_ip
}

module "bastion" {
  source = "./modules/bastion"

  cluster            = local.cluster
  networks           = local.networks
  flavor_name        = var.bastion_flavor
  public_ip          = local.bastion_public_ip
  private_ip         = local.bastion_private_ip
  private_cidr       = var.private_cidr
  pod_cidr           = var.pod_cidr
  ssh_allowed_cidrs  = var.ssh_allowed_cidrs
  root_password_hash = local.root_password_hash
}

module "nodes" {
  source = "./modules/nodes"

  cluster               = local.cluster
  networks              = local.networks
  nodes                 = local.kube_nodes
  server_group_policies = var.server_group_policies
  distribution          = var.kubernetes_distribution
  api_port              = local.api_port
  admin_network_name    = var.admin_network_name
  private_cidr          = var.private_cidr
  pod_cidr              = var.pod_cidr
  service_cidr          = var.service_cidr
  bastion_private_ip    = local.bastion_private_ip
  # With a load balancer the API is reached through it only, not on k8s-cp-1's outside port.
  api_allowed_cidrs         = local.octavia ? [] : local.api_allowed_cidrs
  api_load_balancer_sources = local.api_load_balancer_sources
  load_balancer_cidr        = local.load_balancer_cidr
  ingress_allowed_cidrs     = var.ingress_allowed_cidrs
  root_password_hash        = local.root_password_hash
}

module "api_lb" {
  source = "./modules/api_lb"
  count  = local.octavia ? 1 : 0

  name_prefix      = var.cluster_name
  tags             = local.tags
  provider_name    = var.api_load_balancer_provider
  vip_subnet_id    = module.network.public_subnet_id
  member_subnet_id = module.network.private_subnet_id
  vip_address      = local.api_vip_ip
  port             = local.api_port
  members          = { for name, node in local.kube_nodes : name => node.private_ip if node.role == "control_plane" }
  # the nodes' own traffic: from the private network, and k8s-cp-1's from its public port
  # (on the VIP's subnet, so it speaks from there)
  allowed_cidrs         = distinct(concat([var.private_cidr], local.first_cp_on_public ? ["${local.first_cp_public_ip}/32"] : [], local.api_allowed_cidrs))
  external_network_name = var.external_network_name
}

locals {
  # Where operators, kos and the pipeline reach the API: the load balancer's floating IP,
  # or k8s-cp-1's own (null when it is reached through the admin network).
  api_floating_ip = local.octavia ? module.api_lb[0].floating_ip : module.nodes.nodes[local.first_control_plane].floating_ip

  kubernetes_nodes = {
    for name, node in module.nodes.nodes : "${name}.${local.domain}" => {
      role              = node.role
      private_ip        = node.private_ip
      floating_ip       = node.floating_ip
      availability_zone = node.availability_zone
    }
  }

  # The contract with the Salt side (pillar/ and salt/): keep the shape stable.
  pillar = {
    kos = {
      # The one source of the distribution: the formula and the orchestration read this.
      distribution = var.kubernetes_distribution
      cluster_name = var.cluster_name
      domain       = local.domain
      deploy_user  = var.deploy_user
      networks = {
        public_cidr  = var.public_cidr
        private_cidr = var.private_cidr
        pod_cidr     = var.pod_cidr
        service_cidr = var.service_cidr
        # where the cloud-controller-manager puts Services' load balancers: a floating IP
        # needs the router, which the private subnet has not (its gateway is the bastion)
        public_subnet_id = module.network.public_subnet_id
        # and their members: the load balancer speaks to the nodes from this subnet
        private_subnet_id = module.network.private_subnet_id
      }
      salt_master = {
        id = "salt.${local.domain}"
        ip = local.salt_master_ip
        # Master of masters: this master's floating IP when it is a top master (null
        # otherwise), the top master its salt-syndic joins (null: none), whether it is a top
        # master itself, and the cluster names whose masters may join it as syndics.
        floating_ip   = module.salt_master.floating_ip
        syndic_master = var.syndic_master
        order_masters = var.top_master != null
        syndics       = var.top_master != null ? var.top_master.syndics : []
        transport     = local.salt_transport
      }
      bastion = {
        id          = "bastion.${local.domain}"
        ip          = module.bastion.private_ip
        public_ip   = local.bastion_public_ip
        floating_ip = module.bastion.floating_ip
      }
      nodes = {
        for id, node in local.kubernetes_nodes : id => {
          role              = node.role
          ip                = node.private_ip
          availability_zone = node.availability_zone
          floating_ip       = node.floating_ip
        }
      }
      first_control_plane = "${local.first_control_plane}.${local.domain}"
      # vip: the load balancer's private address, the cluster's own endpoint (null: each
      # node's local haproxy); floating_ip and admin_ip: where operators reach the API.
      api = {
        load_balancer = var.api_load_balancer
        vip           = local.octavia ? local.api_vip_ip : null
        floating_ip   = local.api_floating_ip
        admin_ip      = module.nodes.nodes[local.first_control_plane].admin_ip
      }
    }
    core = {
      users = [for user in var.users : { name = user.name, ssh_keys = user.ssh_keys, sudo = user.sudo }]
    }
  }
  salt_pillar = yamlencode(local.pillar)
}

module "salt_master" {
  source = "./modules/salt_master"

  cluster            = local.cluster
  networks           = local.networks
  flavor_name        = var.salt_master_flavor
  volume_size        = var.salt_master_volume_size
  volume_type        = var.salt_master_volume_type
  private_ip         = local.salt_master_ip
  private_cidr       = var.private_cidr
  bastion_private_ip = local.bastion_private_ip
  pillar             = local.salt_pillar
  root_password_hash = local.root_password_hash

  # A top master (master of masters) also sits on the public network, behind a floating IP.
  top_master   = var.top_master != null
  public_ip    = local.salt_master_public_ip
  syndic_cidrs = var.top_master != null ? var.top_master.syndic_cidrs : []
}
