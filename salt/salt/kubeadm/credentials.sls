{#- On the issuer (the first control plane, or the joined control plane orch.deploy
    names while a rebuilt first control plane rejoins): a join credential of its own for
    each node the orchestration names in the pillar it passes
    (kos_orchestration:join_nodes), with the role Terraform gave that node: a
    short-lived bootstrap token and the CA hash, and for a control plane only the
    certificate key. Published in the mine for that minion alone; issued on demand by
    the orchestration's wave, never by a highstate; revoked by kubeadm.revoke. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
{%- from "kos/map.jinja" import kos with context %}
{%- set wanted = salt['pillar.get']('kos_orchestration:join_nodes', []) %}
{%- set unknown = wanted | reject('in', kos.nodes) | list + wanted | select('equalto', kos.id) | list %}
{%- if unknown %}

kubeadm-credentials-test-fail_without_changes-unknown:
  test.fail_without_changes:
    - name: >-
        no join credential for {{ unknown | join(', ') }}: only the Kubernetes nodes of this
        deployment join it, and never this node, which issues them
{%- endif %}
{#- kubeadm-config.yaml is kubeadm.master's, which an issuer that joined (another control
    plane, or a first control plane that rejoined) has not run. The certificate upload
    reads it: with external etcd for the etcd client certificates, and in any case for
    the version, which kubeadm would otherwise look up on the internet. #}
{%- set issuing = wanted | reject('in', unknown) | list %}
{%- set write_config = issuing and not salt['file.file_exists'](kubeadm.config_file) %}
{%- if write_config %}

kubeadm-credentials-file-managed-config:
  file.managed:
    - name: {{ kubeadm.config_file }}
    - source: salt://kubeadm/files/kubeadm-config.yaml.jinja
    - template: jinja
    - makedirs: True
    - mode: '0600'
{%- endif %}
{%- for node in issuing %}

kubeadm-credentials-kubeadm_join-credential_present-{{ node }}:
  kubeadm_join.credential_present:
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
{%- if write_config %}
    - require:
      - file: kubeadm-credentials-file-managed-config
{%- endif %}
{%- endfor %}
