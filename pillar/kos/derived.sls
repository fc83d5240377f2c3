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
{%- if 'first_control_plane' in roles %}
  # Join credentials: readable by Kubernetes nodes only.
  kos_join:
    - mine_function: kos.join_info
    - allow_tgt: {{ nodes.keys() | sort | join(',') }}
    - allow_tgt_type: list
  # kubeadm's certificate key decrypts the cluster CA keys: control planes only.
  kos_join_control_plane:
    - mine_function: kos.join_info
    - control_plane: True
    - allow_tgt: {{ nodes | dictsort | selectattr('1.role', 'equalto', 'control_plane') | map(attribute='0') | join(',') }}
    - allow_tgt_type: list
{%- endif %}
