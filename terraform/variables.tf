# Inputs of the kos root module. Cross-variable validations need Terraform >= 1.9.

variable "cluster_name" {
  type        = string
  description = "Prefix of every OpenStack resource name and the value of the kos-cluster tag, so leftovers of a cluster can be found by name or tag."
  default     = "kos"

  validation {
    condition     = can(regex("^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$", var.cluster_name))
    error_message = "cluster_name must be a DNS label: 1 to 32 lowercase letters, digits or '-', starting with a letter and not ending with '-'."
  }
}

variable "external_network_name" {
  type        = string
  description = "Name of the existing external (provider) network: the router's gateway and the pool of the floating IPs."

  validation {
    condition     = length(trimspace(var.external_network_name)) > 0
    error_message = "external_network_name must name the existing external network that carries the floating IPs; it cannot be empty."
  }
}

variable "base_image" {
  type        = string
  description = "Name of the Glance image every VM boots from (a cloud-init enabled Ubuntu or Debian image)."

  validation {
    condition     = length(trimspace(var.base_image)) > 0
    error_message = "base_image must name an existing image; it cannot be empty."
  }
}

variable "kube_node_flavor" {
  type        = string
  description = "Flavor name of the Kubernetes nodes (control plane and workers)."
  default     = "m1.large"

  validation {
    condition     = length(trimspace(var.kube_node_flavor)) > 0
    error_message = "kube_node_flavor cannot be empty."
  }
}

variable "salt_master_flavor" {
  type        = string
  description = "Flavor name of the Salt master."
  default     = "m1.medium"

  validation {
    condition     = length(trimspace(var.salt_master_flavor)) > 0
    error_message = "salt_master_flavor cannot be empty."
  }
}

variable "bastion_flavor" {
  type        = string
  description = "Flavor name of the bastion (SSH entry point and NAT gateway of the private network)."
  default     = "m1.small"

  validation {
    condition     = length(trimspace(var.bastion_flavor)) > 0
    error_message = "bastion_flavor cannot be empty."
  }
}

variable "salt_master_volume_size" {
  type        = number
  description = "Size in GiB of the persistent volume that keeps the Salt master's keys (/etc/salt/pki) and cache (/var/cache/salt) across re-creation."
  default     = 10

  validation {
    condition     = var.salt_master_volume_size >= 1 && floor(var.salt_master_volume_size) == var.salt_master_volume_size
    error_message = "salt_master_volume_size must be a whole number of GiB, at least 1."
  }
}

variable "salt_master_volume_type" {
  type        = string
  description = "Cinder volume type of the Salt master's volume; null takes the cloud's default."
  default     = null
}

variable "deploy_domain_name" {
  type        = string
  description = "DNS domain of the deployment: every minion id and FQDN is <hostname>.<deploy_domain_name>."
  default     = "kos.internal"

  validation {
    condition = (
      length(var.deploy_domain_name) <= 253 &&
      can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)+[a-z]([a-z0-9-]{0,61}[a-z0-9])?$", var.deploy_domain_name))
    )
    error_message = "deploy_domain_name must be a DNS-safe domain with at least two labels: lowercase letters, digits and '-', labels of at most 63 characters separated by dots (e.g. kos.internal)."
  }
}

variable "deploy_user" {
  type        = string
  description = "Account created by cloud-init on every VM for the bootstrapper (passwordless sudo, SSH keys from ssh_public_keys); also the ssh_user output."
  default     = "kos"

  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.deploy_user)) && var.deploy_user != "root"
    error_message = "deploy_user must be a valid Linux user name (lowercase, at most 32 characters) other than root."
  }
}

variable "ssh_public_keys" {
  type        = list(string)
  description = "Public SSH keys authorized for deploy_user. Only public keys: the private key stays in the operator's ssh-agent and never enters Terraform state."

  validation {
    condition     = length(var.ssh_public_keys) > 0
    error_message = "ssh_public_keys needs at least one public key, or nobody can log in as deploy_user."
  }

  validation {
    condition = alltrue([
      for key in var.ssh_public_keys :
      can(regex("^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\\.com) [A-Za-z0-9+/=]+( .*)?$", key))
    ])
    error_message = "Every entry of ssh_public_keys must be one OpenSSH public key line (ssh-ed25519 AAAA... comment); private keys are never accepted."
  }
}

variable "set_root_password" {
  type        = bool
  description = "Whether to set root_password for root on every VM, for console access only (SSH password login stays disabled)."
  default     = false
}

variable "root_password" {
  type        = string
  description = "Root password for console access, used only when set_root_password is true. Only its bcrypt hash reaches the VMs' user data; it never appears in outputs or pillar."
  default     = null
  sensitive   = true

  validation {
    condition     = !var.set_root_password || length(coalesce(var.root_password, "-")) >= 12
    error_message = "set_root_password is true: root_password must be set and at least 12 characters long."
  }
}

variable "users" {
  type = list(object({
    name     = string
    ssh_keys = optional(list(string), [])
    sudo     = optional(bool, false)
  }))
  description = "Human accounts handed to Salt (pillar core:users): name, public SSH keys and whether they get sudo."
  default     = []

  validation {
    condition     = alltrue([for user in var.users : can(regex("^[a-z_][a-z0-9_-]{0,31}$", user.name)) && user.name != "root"])
    error_message = "Every user name must be a valid Linux user name (lowercase, at most 32 characters) other than root."
  }

  validation {
    condition     = length(distinct([for user in var.users : user.name])) == length(var.users)
    error_message = "User names must be unique."
  }
}

variable "kubernetes_distribution" {
  type        = string
  description = "Kubernetes distribution Salt installs: microk8s or kubeadm."
  default     = "microk8s"

  validation {
    condition     = contains(["microk8s", "kubeadm"], var.kubernetes_distribution)
    error_message = "kubernetes_distribution must be microk8s or kubeadm."
  }
}

variable "kubernetes_nodes" {
  type = map(object({
    role    = string
    address = optional(number)
    az      = optional(string)
    flavor  = optional(string)
    boot_volume = optional(object({
      size = number
      type = optional(string)
    }))
  }))
  description = <<-EOT
    The Kubernetes nodes by name (their host names): role (control_plane or worker), and
    optionally az (else availability_zones or Nova chooses), flavor (else kube_node_flavor),
    boot_volume (else boot_volumes of its role) and address (the host number in private_cidr: k8s-cp-<n> has 19 + n and k8s-worker-<n>
    worker_address_base - 1 + n; any other name needs one). k8s-cp-1 is the first control
    plane; control planes are odd in number. Add a node by adding its entry and retire one
    by removing it: every other node keeps its server, address and zone. Null: the counters
    below describe the nodes, as before this variable existed (docs/nodes.md).
  EOT
  default     = null
}

variable "boot_volumes" {
  type = object({
    control_plane = optional(object({
      size = number
      type = optional(string)
    }))
    worker = optional(object({
      size = number
      type = optional(string)
    }))
  })
  description = <<-EOT
    Per role, the nodes' root disk as a Cinder volume made from the image: size in GiB and
    optionally the volume type (else the cloud's default), deleted with its server. Null for
    a role (the default): the flavor's own disk. A node's boot_volume in kubernetes_nodes
    overrides its role's. Changing it rebuilds the nodes it applies to.
  EOT
  default     = {}

  validation {
    condition     = alltrue([for v in values(var.boot_volumes) : v == null || try(v.size >= 1 && floor(v.size) == v.size && (v.type == null || length(trimspace(v.type)) > 0), false)])
    error_message = "boot_volumes: a role's size must be a whole number of GiB, 1 or more, and its type, when given, not empty."
  }
}

variable "server_group_policies" {
  type = object({
    control_plane = optional(string, "anti-affinity")
    worker        = optional(string, "soft-anti-affinity")
  })
  description = <<-EOT
    How Nova places each role's servers, through a server group of the cluster's own per role:
    anti-affinity (each on its own compute host, or the server is not created),
    soft-anti-affinity (apart where Nova can) or none. Control planes default to
    anti-affinity, so one host going down takes one member of etcd or dqlite; a cloud with
    fewer compute hosts (in the nodes' zone) than control planes needs soft-anti-affinity,
    chosen explicitly. Workers default to soft-anti-affinity. A group added to an existing
    cluster takes the servers created from then on; the running ones stay where they are.
  EOT
  default     = {}

  validation {
    condition     = alltrue([for policy in values(var.server_group_policies) : contains(["anti-affinity", "soft-anti-affinity", "none"], policy)])
    error_message = "server_group_policies: each role's policy must be anti-affinity, soft-anti-affinity or none."
  }
}

variable "num_control_plane" {
  type        = number
  description = "Superseded by kubernetes_nodes (docs/nodes.md): number of control-plane nodes (k8s-cp-1 ...); odd, so etcd/dqlite keep a quorum."
  default     = 1

  validation {
    condition     = var.num_control_plane >= 1 && floor(var.num_control_plane) == var.num_control_plane
    error_message = "num_control_plane must be a whole number, at least 1."
  }

  validation {
    condition     = var.num_control_plane % 2 == 1
    error_message = "num_control_plane must be odd (1, 3, 5, ...) so the control plane keeps a quorum."
  }
}

variable "num_kube_nodes" {
  type        = number
  description = "Superseded by kubernetes_nodes (docs/nodes.md): total number of Kubernetes nodes, control plane included: the nodes after the first num_control_plane are workers (k8s-worker-1 ...)."
  default     = 3

  validation {
    condition     = var.num_kube_nodes >= 1 && floor(var.num_kube_nodes) == var.num_kube_nodes
    error_message = "num_kube_nodes must be a whole number, at least 1."
  }

  validation {
    condition     = var.num_kube_nodes >= var.num_control_plane
    error_message = "num_kube_nodes counts the control-plane nodes too, so it cannot be smaller than num_control_plane."
  }

  # Fixed addresses start at host 20 of the private network; the upper half is DHCP's pool.
  validation {
    condition     = try(var.worker_address_base + var.num_kube_nodes - var.num_control_plane <= pow(2, 32 - tonumber(split("/", var.private_cidr)[1])) / 2, true)
    error_message = "private_cidr is too small for num_kube_nodes: the last worker's address (host worker_address_base + its number - 1) must stay below the DHCP pool in the upper half of the network; use a larger private_cidr or fewer nodes."
  }
}

variable "worker_address_base" {
  type        = number
  description = "Host number of k8s-worker-1's private address; k8s-worker-<n> gets host worker_address_base + n - 1 and control planes count up from host 20, so one count never moves the other's nodes. A cluster made before this variable existed had its workers right after its control planes: set 20 + num_control_plane there to keep their addresses."
  default     = 30

  validation {
    condition     = var.worker_address_base >= 20 + var.num_control_plane && floor(var.worker_address_base) == var.worker_address_base
    error_message = "worker_address_base must be a whole number of at least 20 + num_control_plane: the control planes hold hosts 20 up to 20 + num_control_plane - 1."
  }
}

variable "retired_nodes" {
  type        = set(string)
  description = "Superseded by kubernetes_nodes (docs/nodes.md), where a node retires by leaving the map. Kubernetes nodes taken out for good, by name (k8s-worker-2): kos up takes them out of the cluster, then Terraform destroys exactly their servers; every other node keeps its name, address and zone. A retired name is not handed out again: raise num_kube_nodes to add a node."
  default     = []

  validation {
    condition = alltrue([
      # try: Terraform evaluates both sides of &&, and tonumber fails on a malformed name
      for name in var.retired_nodes : try(
        startswith(name, "k8s-cp-")
        ? tonumber(regex("^k8s-cp-([1-9][0-9]*)$", name)[0]) <= var.num_control_plane
        : tonumber(regex("^k8s-worker-([1-9][0-9]*)$", name)[0]) <= var.num_kube_nodes - var.num_control_plane,
        false
      )
    ])
    error_message = "retired_nodes must name nodes the cluster has: k8s-cp-<n> up to num_control_plane, k8s-worker-<n> up to num_kube_nodes - num_control_plane."
  }

  validation {
    condition     = !contains(var.retired_nodes, "k8s-cp-1")
    error_message = "retired_nodes cannot hold k8s-cp-1: the first control plane initialised the cluster and hands out its join credentials."
  }

  validation {
    condition     = (var.num_control_plane - length([for name in var.retired_nodes : name if startswith(name, "k8s-cp-")])) % 2 == 1
    error_message = "retired_nodes must leave an odd number of control planes (1, 3, 5, ...) so etcd/dqlite keep a quorum: retire control planes two at a time."
  }
}

variable "availability_zones" {
  type        = list(string)
  description = "Compute availability zones the Kubernetes nodes are spread across, round-robin over the nodes' address slots (control planes from the first zone, workers from slot worker_address_base - 20); empty lets Nova choose."
  default     = []

  validation {
    condition     = alltrue([for az in var.availability_zones : length(trimspace(az)) > 0])
    error_message = "availability_zones cannot contain empty names."
  }
}

variable "first_control_plane_access" {
  type        = string
  description = "How k8s-cp-1 is reached from outside: floating_ip (a port on the public network with a floating IP) or admin_network (a second port on the existing admin_network_name network)."
  default     = "floating_ip"

  validation {
    condition     = contains(["floating_ip", "admin_network"], var.first_control_plane_access)
    error_message = "first_control_plane_access must be floating_ip or admin_network."
  }
}

variable "admin_network_name" {
  type        = string
  description = "Name of the existing admin network k8s-cp-1 gets a second port on, when first_control_plane_access is admin_network."
  default     = null

  validation {
    condition     = var.first_control_plane_access != "admin_network" || length(trimspace(coalesce(var.admin_network_name, " "))) > 0
    error_message = "first_control_plane_access is admin_network: admin_network_name must name the existing admin network."
  }
}

variable "public_cidr" {
  type        = string
  description = "IPv4 CIDR of the public-facing network (router, bastion, k8s-cp-1 ingress)."
  default     = "10.0.0.0/16"

  validation {
    condition     = can(cidrhost(var.public_cidr, 0)) && try(cidrsubnet(var.public_cidr, 0, 0) == var.public_cidr && tonumber(split("/", var.public_cidr)[1]) >= 8 && tonumber(split("/", var.public_cidr)[1]) <= 26, false) && !strcontains(var.public_cidr, ":")
    error_message = "public_cidr must be an IPv4 network address in CIDR notation with a prefix between /8 and /26 (e.g. 10.0.0.0/16)."
  }
}

variable "private_cidr" {
  type        = string
  description = "IPv4 CIDR of the private network every VM is on; its gateway is the bastion. Keep it off every pod and service network: the default stays clear of microk8s's (10.1.0.0/16, 10.152.183.0/24), kubeadm's (10.244.0.0/16, 10.96.0.0/12) and Calico's (192.168.0.0/16)."
  default     = "10.20.0.0/16"

  validation {
    condition     = can(cidrhost(var.private_cidr, 0)) && try(cidrsubnet(var.private_cidr, 0, 0) == var.private_cidr && tonumber(split("/", var.private_cidr)[1]) >= 8 && tonumber(split("/", var.private_cidr)[1]) <= 26, false) && !strcontains(var.private_cidr, ":")
    error_message = "private_cidr must be an IPv4 network address in CIDR notation with a prefix between /8 and /26 (e.g. 10.1.0.0/16)."
  }

  # Two CIDR blocks overlap exactly when one holds the other's network address.
  validation {
    condition = try(!(
      cidrsubnet("${cidrhost(var.public_cidr, 0)}/${split("/", var.private_cidr)[1]}", 0, 0) == var.private_cidr ||
      cidrsubnet("${cidrhost(var.private_cidr, 0)}/${split("/", var.public_cidr)[1]}", 0, 0) == var.public_cidr
    ), true)
    error_message = "private_cidr overlaps public_cidr: the two networks need disjoint ranges."
  }
}

variable "pod_cidr" {
  type        = string
  description = "IPv4 CIDR of the pod network; kube-router routes it without encapsulation, so every node port allows it as an address pair."
  default     = "10.244.0.0/16"

  validation {
    condition     = can(cidrhost(var.pod_cidr, 0)) && try(cidrsubnet(var.pod_cidr, 0, 0) == var.pod_cidr, false) && !strcontains(var.pod_cidr, ":")
    error_message = "pod_cidr must be an IPv4 network address in CIDR notation (e.g. 10.244.0.0/16)."
  }

  validation {
    condition = try(!(
      cidrsubnet("${cidrhost(var.pod_cidr, 0)}/${split("/", var.private_cidr)[1]}", 0, 0) == var.private_cidr ||
      cidrsubnet("${cidrhost(var.private_cidr, 0)}/${split("/", var.pod_cidr)[1]}", 0, 0) == var.pod_cidr
    ), true)
    error_message = "pod_cidr overlaps private_cidr: pod addresses would collide with the VMs' addresses; choose a range outside the private network."
  }

  validation {
    condition = try(!(
      cidrsubnet("${cidrhost(var.pod_cidr, 0)}/${split("/", var.public_cidr)[1]}", 0, 0) == var.public_cidr ||
      cidrsubnet("${cidrhost(var.public_cidr, 0)}/${split("/", var.pod_cidr)[1]}", 0, 0) == var.pod_cidr
    ), true)
    error_message = "pod_cidr overlaps public_cidr: choose a range outside the public network."
  }
}

variable "service_cidr" {
  type        = string
  description = "IPv4 CIDR of the Kubernetes service network; every node port allows it as an address pair."
  default     = "10.96.0.0/12"

  validation {
    condition     = can(cidrhost(var.service_cidr, 0)) && try(cidrsubnet(var.service_cidr, 0, 0) == var.service_cidr, false) && !strcontains(var.service_cidr, ":")
    error_message = "service_cidr must be an IPv4 network address in CIDR notation (e.g. 10.96.0.0/12)."
  }

  validation {
    condition = try(!(
      cidrsubnet("${cidrhost(var.service_cidr, 0)}/${split("/", var.private_cidr)[1]}", 0, 0) == var.private_cidr ||
      cidrsubnet("${cidrhost(var.private_cidr, 0)}/${split("/", var.service_cidr)[1]}", 0, 0) == var.service_cidr
    ), true)
    error_message = "service_cidr overlaps private_cidr: service addresses would collide with the VMs' addresses; choose a range outside the private network."
  }

  validation {
    condition = try(!(
      cidrsubnet("${cidrhost(var.service_cidr, 0)}/${split("/", var.public_cidr)[1]}", 0, 0) == var.public_cidr ||
      cidrsubnet("${cidrhost(var.public_cidr, 0)}/${split("/", var.service_cidr)[1]}", 0, 0) == var.service_cidr
    ), true)
    error_message = "service_cidr overlaps public_cidr: choose a range outside the public network."
  }

  validation {
    condition = try(!(
      cidrsubnet("${cidrhost(var.service_cidr, 0)}/${split("/", var.pod_cidr)[1]}", 0, 0) == var.pod_cidr ||
      cidrsubnet("${cidrhost(var.pod_cidr, 0)}/${split("/", var.service_cidr)[1]}", 0, 0) == var.service_cidr
    ), true)
    error_message = "service_cidr overlaps pod_cidr: pods and services need disjoint ranges."
  }
}

variable "dns_nameservers" {
  type        = list(string)
  description = "IPv4 resolvers DHCP hands out on both subnets; empty keeps the cloud's default."
  default     = []

  validation {
    condition     = alltrue([for ip in var.dns_nameservers : can(cidrhost("${ip}/32", 0)) && !strcontains(ip, "/")])
    error_message = "dns_nameservers must be IPv4 addresses without a prefix length."
  }
}

variable "ssh_allowed_cidrs" {
  type        = list(string)
  description = "IPv4 CIDRs allowed to reach the bastion's SSH port; every other VM takes SSH from the bastion only."

  validation {
    condition     = length(var.ssh_allowed_cidrs) > 0 && alltrue([for cidr in var.ssh_allowed_cidrs : can(cidrhost(cidr, 0)) && !strcontains(cidr, ":")])
    error_message = "ssh_allowed_cidrs needs at least one IPv4 CIDR (e.g. 203.0.113.0/24), all valid."
  }
}

variable "api_allowed_cidrs" {
  type        = list(string)
  description = "IPv4 CIDRs allowed to reach the Kubernetes API from outside (on the load balancer's floating IP, or k8s-cp-1's outside port when api_load_balancer is none); null reuses ssh_allowed_cidrs."
  default     = null

  validation {
    condition     = var.api_allowed_cidrs == null || alltrue([for cidr in coalesce(var.api_allowed_cidrs, []) : can(cidrhost(cidr, 0)) && !strcontains(cidr, ":")])
    error_message = "api_allowed_cidrs must be IPv4 CIDRs."
  }
}

variable "api_load_balancer" {
  type        = string
  description = "What serves the Kubernetes API. octavia: an Octavia load balancer in front of every control plane, its VIP (host 9 of public_cidr, which the nodes reach through the router) for the cluster's own clients and a floating IP for operators, kos and the pipeline, open to api_allowed_cidrs. none: for clouds without Octavia, each node's local haproxy in front of the control planes and k8s-cp-1's own floating IP (or admin-network address) for operators. kos's preflight refuses octavia where the cloud's catalog has no load-balancer service."
  default     = "none"

  validation {
    condition     = contains(["octavia", "none"], var.api_load_balancer)
    error_message = "api_load_balancer must be octavia (an Octavia load balancer in front of the control planes) or none (clouds without Octavia)."
  }
}

variable "api_load_balancer_provider" {
  type        = string
  description = "The Octavia provider of the API load balancer (amphora, ovn, ...), when api_load_balancer is octavia; null: the cloud's default provider."
  default     = null

  validation {
    condition     = var.api_load_balancer_provider == null || can(regex("^[a-z][a-z0-9_-]*$", coalesce(var.api_load_balancer_provider, "-")))
    error_message = "api_load_balancer_provider must be an Octavia provider name such as amphora or ovn (lowercase letters, digits, '-' and '_'), or null for the cloud's default."
  }
}

variable "ingress_allowed_cidrs" {
  type        = list(string)
  description = "IPv4 CIDRs allowed to reach HTTP/HTTPS (the ingress controller) on k8s-cp-1's outside port."
  default     = ["0.0.0.0/0"]

  validation {
    condition     = alltrue([for cidr in var.ingress_allowed_cidrs : can(cidrhost(cidr, 0)) && !strcontains(cidr, ":")])
    error_message = "ingress_allowed_cidrs must be IPv4 CIDRs."
  }
}

variable "salt_version" {
  type        = string
  description = "Salt release installed on every VM by bootstrap-salt.sh (master and minions must match)."
  default     = "3008.3"

  validation {
    condition     = can(regex("^[0-9]{4}(\\.[0-9]+)?$", var.salt_version))
    error_message = "salt_version must be a Salt release such as 3008.3 or a major such as 3008."
  }
}

variable "salt_bootstrap_url" {
  type        = string
  description = "Where cloud-init downloads bootstrap-salt.sh from."
  default     = "https://github.com/saltstack/salt-bootstrap/releases/latest/download/bootstrap-salt.sh"

  validation {
    condition     = startswith(var.salt_bootstrap_url, "https://")
    error_message = "salt_bootstrap_url must be an https:// URL."
  }
}

variable "salt_bootstrap_sha256" {
  type        = string
  description = "Expected SHA-256 of bootstrap-salt.sh; when set, cloud-init refuses a script that does not match."
  default     = null

  validation {
    condition     = var.salt_bootstrap_sha256 == null || can(regex("^[0-9a-f]{64}$", coalesce(var.salt_bootstrap_sha256, "-")))
    error_message = "salt_bootstrap_sha256 must be 64 lowercase hex digits."
  }
}

variable "syndic_master" {
  type        = string
  description = "Address (IPv4 or DNS name) of a top Salt master (master of masters). When set, this environment's master also runs salt-syndic toward it (ports 4505-4506), so the top master can target this environment's minions; this master keeps working on its own."
  default     = null

  validation {
    condition = var.syndic_master == null || try(
      (can(cidrhost("${var.syndic_master}/32", 0)) && !strcontains(var.syndic_master, "/")) ||
      (length(var.syndic_master) <= 253 && can(regex("^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\\.)*[a-z]([a-z0-9-]{0,61}[a-z0-9])?$", var.syndic_master))),
      false
    )
    error_message = "syndic_master must be the top Salt master's IPv4 address (e.g. 203.0.113.20) or DNS name (lowercase letters, digits and '-', labels of at most 63 characters separated by dots, e.g. salt.top.example); leave it unset (null) when this environment's master joins no top master."
  }
}

variable "top_master" {
  type = object({
    syndic_cidrs = list(string)
    syndics      = optional(list(string), [])
  })
  description = "Make this environment's master a top master (Salt's order_masters): it gets a port on the public network with a floating IP, and the Salt ports 4505-4506 open from syndic_cidrs (the addresses other environments' masters reach it from: their bastions' floating IPs as /32, or their NAT's range). syndics: the cluster_name of each environment whose master may join as a syndic; kos accepts those masters' keys after checking them against their consoles. null: no top master here."
  default     = null

  validation {
    condition     = var.top_master == null || try(length(var.top_master.syndic_cidrs) > 0, false)
    error_message = "top_master.syndic_cidrs needs at least one IPv4 CIDR: the addresses the syndic environments' masters reach this master from (their bastions' floating IPs as /32)."
  }

  validation {
    condition = var.top_master == null || try(alltrue([
      for cidr in var.top_master.syndic_cidrs :
      can(cidrhost(cidr, 0)) && try(cidrsubnet(cidr, 0, 0) == cidr, false) && !strcontains(cidr, ":")
    ]), false)
    error_message = "Every entry of top_master.syndic_cidrs must be an IPv4 network address in CIDR notation (e.g. 198.51.100.7/32 for a syndic environment's bastion floating IP, 198.51.100.0/24 for its NAT's range)."
  }

  validation {
    condition = var.top_master == null || try(alltrue([
      for name in var.top_master.syndics : can(regex("^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$", name))
    ]), false)
    error_message = "Every entry of top_master.syndics must be the cluster_name of a syndic environment: 1 to 32 lowercase letters, digits or '-', starting with a letter and not ending with '-'."
  }

  validation {
    condition     = var.top_master == null || try(!contains(var.top_master.syndics, var.cluster_name), false)
    error_message = "top_master.syndics cannot hold this environment's own cluster_name: a top master does not join itself; list the other environments' cluster names."
  }
}
