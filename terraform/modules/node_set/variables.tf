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
  description = "The Kubernetes nodes by name (the root module's variable of the same name, which describes it); null: the counters below describe them."
  default     = null

  validation {
    condition     = var.kubernetes_nodes == null || alltrue([for node in values(coalesce(var.kubernetes_nodes, {})) : contains(["control_plane", "worker"], node.role)])
    error_message = "kubernetes_nodes: every node's role must be control_plane or worker."
  }

  validation {
    condition     = var.kubernetes_nodes == null || alltrue([for name in keys(coalesce(var.kubernetes_nodes, {})) : can(regex("^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$", name))])
    error_message = "kubernetes_nodes: a node's name is its host name: lower-case letters, digits and '-', starting with a letter, at most 32 characters."
  }

  validation {
    condition     = var.kubernetes_nodes == null || try(var.kubernetes_nodes["k8s-cp-1"].role == "control_plane", false)
    error_message = "kubernetes_nodes must hold k8s-cp-1 with role control_plane: the first control plane initialised the cluster and hands out its join credentials."
  }

  validation {
    condition     = var.kubernetes_nodes == null || length([for node in values(coalesce(var.kubernetes_nodes, {})) : node if node.role == "control_plane"]) % 2 == 1
    error_message = "kubernetes_nodes must hold an odd number of control planes (1, 3, 5, ...) so etcd/dqlite keep a quorum: add or retire control planes two at a time."
  }

  validation {
    condition = var.kubernetes_nodes == null || alltrue([
      for name, node in coalesce(var.kubernetes_nodes, {}) :
      (!can(regex("^k8s-cp-[0-9]+$", name)) || node.role == "control_plane") && (!can(regex("^k8s-worker-[0-9]+$", name)) || node.role == "worker")
    ])
    error_message = "kubernetes_nodes: k8s-cp-<n> names a control plane and k8s-worker-<n> a worker; give another role another name."
  }

  validation {
    condition = var.kubernetes_nodes == null || alltrue([
      for name, node in coalesce(var.kubernetes_nodes, {}) :
      node.address != null || can(regex("^k8s-(cp|worker)-[1-9][0-9]*$", name))
    ])
    error_message = "kubernetes_nodes: a node named other than k8s-cp-<n> or k8s-worker-<n> needs an address (its host number in private_cidr)."
  }

  validation {
    condition = var.kubernetes_nodes == null || alltrue([
      for node in values(coalesce(var.kubernetes_nodes, {})) : node.az == null || try(length(trimspace(node.az)) > 0, false)
    ])
    error_message = "kubernetes_nodes: a node's az cannot be empty; leave it out to let availability_zones or Nova choose."
  }

  validation {
    condition = var.kubernetes_nodes == null || alltrue([
      for node in values(coalesce(var.kubernetes_nodes, {})) : node.flavor == null || try(length(trimspace(node.flavor)) > 0, false)
    ])
    error_message = "kubernetes_nodes: a node's flavor cannot be empty; leave it out for kube_node_flavor."
  }

  validation {
    condition = var.kubernetes_nodes == null || alltrue([
      for node in values(coalesce(var.kubernetes_nodes, {})) : node.boot_volume == null || try(node.boot_volume.size >= 1 && floor(node.boot_volume.size) == node.boot_volume.size && (node.boot_volume.type == null || length(trimspace(node.boot_volume.type)) > 0), false)
    ])
    error_message = "kubernetes_nodes: a node's boot_volume size must be a whole number of GiB, 1 or more, and its type, when given, not empty."
  }

  validation {
    condition     = var.kubernetes_nodes == null || (var.num_control_plane == 1 && var.num_kube_nodes == 3 && length(var.retired_nodes) == 0)
    error_message = "kubernetes_nodes replaces num_control_plane, num_kube_nodes and retired_nodes: remove those from the variables (docs/nodes.md, From counters to the map)."
  }
}

variable "num_control_plane" {
  type        = number
  description = "Counters of a cluster described before kubernetes_nodes (the root module validates them)."
  default     = 1
}

variable "num_kube_nodes" {
  type        = number
  description = "Counters of a cluster described before kubernetes_nodes."
  default     = 3
}

variable "worker_address_base" {
  type        = number
  description = "Host number of k8s-worker-1's private address."
  default     = 30
}

variable "retired_nodes" {
  type        = set(string)
  description = "Counters of a cluster described before kubernetes_nodes."
  default     = []
}

variable "availability_zones" {
  type        = list(string)
  description = "Zones a node without its own az is placed in, round-robin over address slots."
  default     = []
}

variable "private_cidr" {
  type        = string
  description = "The private network: fixed addresses stay in its lower half, above the infrastructure's."
  default     = "10.0.0.0/24"
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
  description = "Per role, the root disk as a Cinder volume (the root module's variable of the same name, which validates it)."
  default     = {}
}
