{#- On a control plane: cordon and drain the node orch.upgrade refreshes next
    (pillar kos_upgrade:node; kos_upgrade:drain_timeout seconds for evictions). #}
{%- set upgrade = salt['pillar.get']('kos_upgrade', {}) %}

microk8s-upgrade-drain-microk8s-node_drained:
  microk8s.node_drained:
    - name: {{ upgrade.node }}
    - timeout: {{ upgrade.drain_timeout }}
