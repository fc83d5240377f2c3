variable "cluster" {
  type        = any
  description = "What every server of the cluster shares (name prefix, tags, image, external network, cloud-init settings), handed to modules/server, whose variable of the same name types and describes it."
}

variable "networks" {
  type        = any
  description = "The private and public networks and subnets, handed to modules/server, whose variable of the same name types and describes them."
}

variable "nodes" {
  type = map(object({
    role              = string
    private_ip        = string
    availability_zone = optional(string)
    flavor_name       = string
    boot_volume = optional(object({
      size = number
      type = optional(string)
    }))
    public_ip     = optional(string)
    floating_ip   = optional(bool, false)
    admin_network = optional(bool, false)
  }))
  description = "Kubernetes nodes by hostname: role (control_plane or worker), fixed private address, availability zone, flavor, root disk as a Cinder volume (boot_volume; null: the flavor's), and for the first control plane a public address with a floating IP or a port on the admin network."

  validation {
    condition     = alltrue([for node in values(var.nodes) : contains(["control_plane", "worker"], node.role)])
    error_message = "Every node's role must be control_plane or worker."
  }

  validation {
    condition     = alltrue([for node in values(var.nodes) : !node.floating_ip || node.public_ip != null])
    error_message = "A node with a floating IP needs a public_ip: the floating IP is bound to its public port."
  }
}

variable "distribution" {
  type        = string
  description = "microk8s or kubeadm: decides the datastore and pod-network ports opened between nodes, and whether ports carry pod and service addresses."

  validation {
    condition     = contains(["microk8s", "kubeadm"], var.distribution)
    error_message = "distribution must be microk8s or kubeadm."
  }
}

variable "api_port" {
  type        = number
  description = "Port of the Kubernetes API server."
}

variable "admin_network_name" {
  type        = string
  description = "Existing admin network for nodes with admin_network = true."
  default     = null
}

variable "private_cidr" {
  type        = string
  description = "CIDR of the private network."
}

variable "pod_cidr" {
  type        = string
  description = "CIDR of the pods: with a routed pod network (kubeadm) an allowed address pair on every node port and a trusted source."
}

variable "service_cidr" {
  type        = string
  description = "CIDR of the services: with a routed pod network (kubeadm) an allowed address pair on every node port."
}

variable "bastion_private_ip" {
  type        = string
  description = "Private address of the bastion, the only SSH source allowed."
}

variable "api_allowed_cidrs" {
  type        = list(string)
  description = "CIDRs allowed to the API port on the outside ports (public or admin)."
  default     = []
}

variable "api_load_balancer_sources" {
  type        = list(string)
  description = "CIDRs an API load balancer's traffic to the control planes comes from (empty: no load balancer); allowed to the API port on every node's private port."
  default     = []
}

variable "load_balancer_cidr" {
  type        = string
  description = "Where Octavia's amphorae reach the nodes from (the DHCP pool of the private network): allowed to the NodePorts, which Services of type LoadBalancer forward to."
}

variable "ingress_allowed_cidrs" {
  type        = list(string)
  description = "CIDRs allowed to HTTP/HTTPS on the outside ports (public or admin)."
  default     = []
}

variable "root_password_hash" {
  type        = string
  description = "Hash of root's console password, or null to leave root without one."
  default     = null
  sensitive   = true
}

variable "server_group_policies" {
  type = object({
    control_plane = string
    worker        = string
  })
  description = "Nova server group policy per role (anti-affinity, soft-anti-affinity or none): the root module's variable of the same name describes it."
  default     = { control_plane = "none", worker = "none" }

  validation {
    condition     = alltrue([for policy in values(var.server_group_policies) : contains(["anti-affinity", "soft-anti-affinity", "none"], policy)])
    error_message = "Every server group policy must be anti-affinity, soft-anti-affinity or none."
  }
}
