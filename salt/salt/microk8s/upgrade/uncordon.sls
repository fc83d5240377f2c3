{#- On a control plane: the node orch.upgrade refreshed (kos_upgrade:node) is Ready on the
    new track (kos_upgrade:track), then takes Pods again, unless the operator had cordoned
    it before the upgrade (kos_upgrade:cordoned): it stays cordoned, as it was. #}
{%- set upgrade = salt['pillar.get']('kos_upgrade', {}) %}

microk8s-upgrade-uncordon-microk8s-node_ready:
  microk8s.node_ready:
    - name: {{ upgrade.node }}
    - track: {{ upgrade.track | string | tojson }}
    - timeout: {{ upgrade.ready_timeout }}
{%- if upgrade.cordoned %}

microk8s-upgrade-uncordon-test-succeed_without_changes-kept:
  test.succeed_without_changes:
    - name: {{ (upgrade.node ~ " stays cordoned: it was before the upgrade (kubectl uncordon it when it may take Pods)") | tojson }}
    - require:
      - microk8s: microk8s-upgrade-uncordon-microk8s-node_ready
{%- else %}

microk8s-upgrade-uncordon-microk8s-node_uncordoned:
  microk8s.node_uncordoned:
    - name: {{ upgrade.node }}
    - require:
      - microk8s: microk8s-upgrade-uncordon-microk8s-node_ready
{%- endif %}
