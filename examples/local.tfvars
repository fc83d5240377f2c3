# A cluster on the local rehearsal cloud: kos up --cloud local --var-file examples/local.tfvars
# (plus a var file or TF_VAR_ssh_public_keys with a key your ssh-agent holds).
cluster_name            = "demo"
kubernetes_distribution = "microk8s"
num_control_plane       = 1
num_kube_nodes          = 3
# Addresses of the local networks; they must not overlap a route of this machine.
public_cidr       = "10.240.0.0/24"
private_cidr      = "10.241.0.0/24"
ssh_allowed_cidrs = ["10.240.0.0/24"]
# Required by the Terraform module, not used by the local cloud (its image is a cached
# debootstrap Debian, its flavors are the machine's).
external_network_name = "local"
base_image            = "debian-12-local"
