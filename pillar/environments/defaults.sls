# Defaults for every environment. Override per environment in
# environments/<domain with dots as underscores>.sls, per hostname in
# minions/defaults/<hostname>.sls, per host in minions/<domain>/<hostname>.sls.
# Every key is documented in pillar.example.
# kubernetes:distribution is not set here: it comes from Terraform's
# kubernetes_distribution (_from_terraform.sls), which a default here would override.

core:
  ipv6_disabled: false
  locale: C.UTF-8
