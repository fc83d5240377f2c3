{#- On a control plane: remove the node that left from the cluster (microk8s remove-node;
    with kos_remove:force also one that never left, its server gone). #}
{%- set remove = salt['pillar.get']('kos_remove', {}) %}

microk8s-remove-forget-microk8s-node_removed:
  microk8s.node_removed:
    - name: {{ remove.node }}
    - force: {{ remove.force | tojson }}
