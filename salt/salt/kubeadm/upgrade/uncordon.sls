{#- On a control plane: the node orch.upgrade upgraded (kos_upgrade:node) is Ready on the
    new version (kos_upgrade:version), then takes Pods again, unless the operator had
    cordoned it before the upgrade (kos_upgrade:cordoned): it stays cordoned, as it was. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
{%- set upgrade = salt['pillar.get']('kos_upgrade', {}) %}

kubeadm-upgrade-uncordon-kubeadm_upgrade-node_ready:
  kubeadm_upgrade.node_ready:
    - name: {{ upgrade.node }}
    - version: {{ upgrade.version }}
    - timeout: {{ upgrade.ready_timeout }}
    - kubeconfig: {{ kubeadm.admin_conf }}
{%- if upgrade.cordoned %}

kubeadm-upgrade-uncordon-test-succeed_without_changes-kept:
  test.succeed_without_changes:
    - name: {{ (upgrade.node ~ " stays cordoned: it was before the upgrade (kubectl uncordon it when it may take Pods)") | tojson }}
    - require:
      - kubeadm_upgrade: kubeadm-upgrade-uncordon-kubeadm_upgrade-node_ready
{%- else %}

kubeadm-upgrade-uncordon-kubeadm_upgrade-node_uncordoned:
  kubeadm_upgrade.node_uncordoned:
    - name: {{ upgrade.node }}
    - kubeconfig: {{ kubeadm.admin_conf }}
    - require:
      - kubeadm_upgrade: kubeadm-upgrade-uncordon-kubeadm_upgrade-node_ready
{%- endif %}
