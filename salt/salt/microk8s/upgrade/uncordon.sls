{#- On a control plane: the node orch.upgrade refreshed (kos_upgrade:node) is Ready on the
    new track (kos_upgrade:track), then takes Pods again. #}
{%- set upgrade = salt['pillar.get']('kos_upgrade', {}) %}

microk8s-upgrade-uncordon-microk8s-node_ready:
  microk8s.node_ready:
    - name: {{ upgrade.node }}
    - track: {{ upgrade.track | string | tojson }}
    - timeout: {{ upgrade.ready_timeout }}

microk8s-upgrade-uncordon-microk8s-node_uncordoned:
  microk8s.node_uncordoned:
    - name: {{ upgrade.node }}
    - require:
      - microk8s: microk8s-upgrade-uncordon-microk8s-node_ready
