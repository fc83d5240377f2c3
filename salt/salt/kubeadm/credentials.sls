{#- On the first control plane: a join credential of its own for each node the
    orchestration names in the pillar it passes (kos_orchestration:join_nodes), with
    the role Terraform gave that node: a short-lived bootstrap token and the CA hash, and
    for a control plane only the certificate key. Published in the mine for that minion
    alone; issued on demand by the orchestration's wave, never by a highstate; revoked by
    kubeadm.revoke. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
{%- from "kos/map.jinja" import kos with context %}
{%- set wanted = salt['pillar.get']('kos_orchestration:join_nodes', []) %}
{%- set unknown = wanted | reject('in', kos.nodes) | list + wanted | select('equalto', kos.first_control_plane) | list %}
{%- if unknown %}

kubeadm-credentials-test-fail_without_changes-unknown:
  test.fail_without_changes:
    - name: >-
        no join credential for {{ unknown | join(', ') }}: only the Kubernetes nodes of this
        deployment but the first control plane join it
{%- endif %}
{%- for node in wanted if node not in unknown %}

kubeadm-credentials-kubeadm-join_credential_present-{{ node }}:
  kubeadm.join_credential_present:
    - name: {{ node }}
    # Terraform's role, whatever asked: a worker never gets the certificate key
    - role: {{ kos.nodes[node].role }}
    - node_name: {{ kubeadm.node_names[node] }}
    - ttl: {{ kubeadm.token.ttl }}
    - min_remaining: {{ kubeadm.token.min_remaining }}
    - key_min_remaining: {{ kubeadm.certificate_key.min_remaining }}
    - description: {{ kubeadm.token_description | tojson }}
    - ca_file: {{ kubeadm.kube_dir }}/pki/ca.crt
    - config: {{ kubeadm.config_file }}
    - kube_dir: {{ kubeadm.kube_dir }}
{%- endfor %}
