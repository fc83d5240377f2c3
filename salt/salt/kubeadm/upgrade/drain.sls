{#- On a control plane: cordon and drain the node orch.upgrade upgrades next
    (pillar kos_upgrade:node; kos_upgrade:drain_timeout seconds for evictions). #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
{%- set upgrade = salt['pillar.get']('kos_upgrade', {}) %}

kubeadm-upgrade-drain-kubeadm-node_drained:
  kubeadm.node_drained:
    - name: {{ upgrade.node }}
    - timeout: {{ upgrade.drain_timeout }}
    - kubeconfig: {{ kubeadm.admin_conf }}
