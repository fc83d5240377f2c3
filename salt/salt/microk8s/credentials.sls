{#- The first control-plane node: a join token for the other nodes, published in the
    mine. Part of microk8s.master; the orchestration applies it alone when it converges
    only some nodes (pillar limit). #}
{%- from "microk8s/map.jinja" import microk8s with context %}
{%- from "kos/map.jinja" import kos with context %}
include:
  - microk8s
  - microk8s.sans

microk8s-credentials-microk8s-join_token_published:
  microk8s.join_token_published:
    - name: {{ microk8s.join_file }}
    - ttl: {{ microk8s.token.ttl }}
    - min_remaining: {{ microk8s.token.min_remaining }}
{%- if kos.networks.get('private_cidr') %}
    - cidr: {{ kos.networks.private_cidr }}
{%- endif %}
    - snap_data: {{ microk8s.snap_data }}
    # a connection string carries the certificate's fingerprint: SANs first
    - require:
      - sls: microk8s.sans

microk8s-credentials-module-run-mine-update:
  module.run:
    - mine.update: []
    - onchanges:
      - microk8s: microk8s-credentials-microk8s-join_token_published
