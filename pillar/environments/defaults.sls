# Defaults for every environment. Override per environment in
# environments/<domain with dots as underscores>.sls, per hostname in
# minions/defaults/<hostname>.sls, per host in minions/<domain>/<hostname>.sls.
# Every key is documented in pillar.example.
# The distribution is not set here, nor in any other layer: kos:distribution comes from
# Terraform's kubernetes_distribution (_from_terraform.sls), the one place that also decides
# the servers' security groups; so do the networks (kos:networks).

core:
  ipv6_disabled: false
  locale: C.UTF-8
