# Environment prod: `kos --env prod` (or KOS_ENV=prod) reads this file first, then any
# --var-file (in the pipeline: KOS_TFVARS) and TF_VAR_*. No secrets here: credentials and
# site-specific values (external_network_name, base_image, ssh_public_keys,
# ssh_allowed_cidrs) come from the environment's CI/CD variables.
#
# Every environment has its own cluster_name (OpenStack names, kos-cluster tag) and
# deploy_domain_name (minion ids; pillar layer pillar/environments/prod_kos_internal.sls).
cluster_name            = "kos-prod"
deploy_domain_name      = "prod.kos.internal"
kubernetes_distribution = "kubeadm"
public_cidr             = "10.20.0.0/16"
private_cidr            = "10.21.0.0/16"
# Three control planes, three workers (docs/nodes.md).
kubernetes_nodes = {
  k8s-cp-1     = { role = "control_plane" }
  k8s-cp-2     = { role = "control_plane" }
  k8s-cp-3     = { role = "control_plane" }
  k8s-worker-1 = { role = "worker" }
  k8s-worker-2 = { role = "worker" }
  k8s-worker-3 = { role = "worker" }
}
