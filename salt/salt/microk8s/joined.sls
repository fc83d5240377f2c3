{#- Every other node joins the cluster with the token its issuer (kos.issuer: the first
    control plane, or another joined one while a rebuilt first control plane rejoins)
    published in the mine. #}
{%- from "kos/map.jinja" import kos with context %}
{%- set role = kos.nodes.get(kos.id, {}).get('role', 'worker') %}
include:
  - microk8s
{%- if role == 'control_plane' %}
  - microk8s.sans
{%- endif %}

microk8s-joined-microk8s-cluster_joined:
  microk8s.cluster_joined:
    - name: {{ kos.issuer }}
    - source: {{ kos.issuer }}
    - role: {{ role }}
    - require:
      - microk8s: microk8s-init-microk8s-running
{%- if role == 'control_plane' %}
      - sls: microk8s.sans
{%- endif %}
