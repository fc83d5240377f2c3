# Environment dev: `kos --env dev` (or KOS_ENV=dev) reads this file first, then any
# --var-file (in the pipeline: KOS_TFVARS) and TF_VAR_*. No secrets here: credentials and
# site-specific values (external_network_name, base_image, ssh_public_keys,
# ssh_allowed_cidrs) come from the environment's CI/CD variables.
#
# Every environment has its own cluster_name (OpenStack names, kos-cluster tag) and
# deploy_domain_name (minion ids; pillar layer pillar/environments/dev_kos_internal.sls).
cluster_name            = "kos-dev"
deploy_domain_name      = "dev.kos.internal"
kubernetes_distribution = "microk8s"
# The Kubernetes nodes by name (docs/nodes.md): add a node by adding its entry, retire one by
# removing it.
kubernetes_nodes = {
  k8s-cp-1     = { role = "control_plane" }
  k8s-worker-1 = { role = "worker" }
  k8s-worker-2 = { role = "worker" }
}
# Own address ranges, so dev and prod can share a project (or the rehearsal cloud).
public_cidr  = "10.10.0.0/16"
private_cidr = "10.11.0.0/16"
