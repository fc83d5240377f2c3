{#- On a control plane: cordon and drain the node orch.remove takes out next (pillar
    kos_remove:node; kos_remove:drain_timeout seconds for evictions). A node that is no
    longer registered has left already: a re-run goes on. #}
{%- set remove = salt['pillar.get']('kos_remove', {}) %}

microk8s-remove-drain-microk8s-node_drained:
  microk8s.node_drained:
    - name: {{ remove.node }}
    - timeout: {{ remove.drain_timeout }}
    - absent_ok: True
