{#- Facts derived from the Terraform layer for this minion: its roles, and the mine
    functions with their ACLs. Pillar files cannot read each other's values, so the
    Terraform layer is imported here; every deployment has one (Terraform hands it to the
    master), and without it this file fails to render, naming _from_terraform.sls.
    opts.id is the authenticated minion id. #}
{%- import_yaml '_from_terraform.sls' as tf %}
{%- set kos = tf.get('kos', {}) %}
{%- set nodes = kos.get('nodes', {}) %}
{%- set roles = [] %}
{%- if kos.get('salt_master', {}).get('id') == opts.id %}{% do roles.append('salt_master') %}{% endif %}
{%- if kos.get('bastion', {}).get('id') == opts.id %}{% do roles.append('bastion') %}{% endif %}
{%- if opts.id in nodes %}
{%- do roles.append(nodes[opts.id].get('role')) %}
{%- do roles.append('kubernetes_node') %}
{%- if kos.get('first_control_plane') == opts.id %}{% do roles.append('first_control_plane') %}{% endif %}
{%- endif %}
kos:
  roles: {{ roles | tojson }}

mine_functions:
  kos_private_ips:
    - mine_function: network.ip_addrs
    - cidr: {{ kos.get('networks', {}).get('private_cidr') }}
{%- if 'kubernetes_node' in roles %}
  # Each node's place in its cluster (not secret). The first control plane's says whether
  # the cluster is up: the master's reactor converges a minion that starts only once it
  # is. The others' say whether they joined: the first control plane never initialises
  # a cluster while they have (kos.sole_cluster). Join credentials are published per
  # node by microk8s/kubeadm.credentials (mine.send, readable by that node alone).
  kos_kubernetes:
    - mine_function: kos.kubernetes_state
{%- endif %}
{%- if 'control_plane' in roles %}

# Every control plane checks its Kubernetes certificates daily and fires
# kos/certificates/expiring when one expires within kos:certificates:warn_days
# (kos.check_certificates). Salt's own scheduler: change the interval in a later layer
# (schedule:kos-certificates:hours).
schedule:
  kos-certificates:
    function: kos.check_certificates
    hours: 24
    run_on_start: False
    return_job: False
{%- endif %}
{%- if 'salt_master' in roles and kos.get('salt_master', {}).get('syndic_master') %}

# A master that joins a top master checks every minute that its salt-syndic still listens
# to the top, and restarts it when the top publishes again after a restart (Salt 3008's
# syndic does not subscribe again by itself: saltext.kos.modules.kos_syndic).
schedule:
  kos-syndic:
    function: kos_syndic.heal
    minutes: 1
    run_on_start: False
    return_job: False
{%- endif %}
