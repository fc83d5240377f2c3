# A cluster on the rehearsal cloud: kos up --cloud local --var-file examples/local.tfvars
# (plus a var file or TF_VAR_ssh_public_keys with a key your ssh-agent holds).
cluster_name            = "demo"
kubernetes_distribution = "microk8s"
# The Kubernetes nodes by name: one control plane and two workers. Add a node by adding its
# entry, retire one by removing it (docs/nodes.md).
kubernetes_nodes = {
  k8s-cp-1     = { role = "control_plane" }
  k8s-worker-1 = { role = "worker" }
  k8s-worker-2 = { role = "worker" }
}
# The API behind an Octavia load balancer (an amphora the rehearsal cloud boots): the
# kubeconfig kos writes names its floating IP. "none" on clouds without Octavia.
api_load_balancer = "octavia"
# The cluster's own networks live inside the cloud (Neutron), not on this machine.
public_cidr  = "10.240.0.0/24"
private_cidr = "10.241.0.0/24"
# What the rehearsal cloud offers, as any OpenStack would: its external network, image and
# flavors (m1.tiny ... m1.xlarge).
external_network_name = "public"
base_image            = "debian-12-rehearsal"
# This machine reaches the cloud's floating IPs from 100.64.0.0/10 (each rehearsal cloud's
# external network is a /24 of it).
ssh_allowed_cidrs = ["100.64.0.0/10"]
