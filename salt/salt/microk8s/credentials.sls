{#- On the issuer (the first control plane, or the joined control plane orch.deploy
    names while a rebuilt first control plane rejoins): a join credential of its own for
    each node the orchestration names in the pillar it passes
    (kos_orchestration:join_nodes), with the role Terraform gave that node, published in
    the mine for that minion alone. Issued on demand by the orchestration's wave, never
    by a highstate; revoked by microk8s.revoke. #}
{%- from "microk8s/map.jinja" import microk8s with context %}
{%- from "kos/map.jinja" import kos with context %}
{%- set wanted = salt['pillar.get']('kos_orchestration:join_nodes', []) %}
{%- set unknown = wanted | reject('in', kos.nodes) | list + wanted | select('equalto', kos.id) | list %}
include:
  - microk8s
  - microk8s.sans
{%- if unknown %}

microk8s-credentials-test-fail_without_changes-unknown:
  test.fail_without_changes:
    - name: >-
        no join credential for {{ unknown | join(', ') }}: only the Kubernetes nodes of this
        deployment join it, and never this node, which issues them
{%- endif %}
{%- for node in wanted if node not in unknown %}

microk8s-credentials-microk8s-join_credential_present-{{ node }}:
  microk8s.join_credential_present:
    - name: {{ node }}
    # Terraform's role, whatever asked: a worker never gets a control-plane credential
    - role: {{ kos.nodes[node].role }}
    - ttl: {{ microk8s.token.ttl }}
    - min_remaining: {{ microk8s.token.min_remaining }}
{%- if kos.networks.get('private_cidr') %}
    - cidr: {{ kos.networks.private_cidr }}
{%- endif %}
    - snap_data: {{ microk8s.snap_data }}
    # a connection string carries the certificate's fingerprint: SANs first
    - require:
      - sls: microk8s.sans
{%- endfor %}
