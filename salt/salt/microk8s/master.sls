{#- The first control-plane node: SANs, addons, and a join token published in the
    mine for the other nodes. The certificate is settled before the token is issued:
    a connection string carries the certificate's fingerprint. #}
{%- from "microk8s/map.jinja" import microk8s with context %}
{%- from "kos/map.jinja" import kos with context %}
include:
  - microk8s
  - microk8s.sans
  - microk8s.addons

microk8s-master-microk8s-join_token_published:
  microk8s.join_token_published:
    - name: {{ microk8s.join_file }}
    - ttl: {{ microk8s.token.ttl }}
    - min_remaining: {{ microk8s.token.min_remaining }}
{%- if kos.networks.get('private_cidr') %}
    - cidr: {{ kos.networks.private_cidr }}
{%- endif %}
    - snap_data: {{ microk8s.snap_data }}
    - require:
      - sls: microk8s.sans
      - sls: microk8s.addons

microk8s-master-module-run-mine-update:
  module.run:
    - mine.update: []
    - onchanges:
      - microk8s: microk8s-master-microk8s-join_token_published
