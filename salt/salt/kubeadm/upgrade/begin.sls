{#- On the node orch.upgrade upgrades next, before it is drained: noted as pending, so a
    re-run after a failure finishes it (uncordon included) and knows whether the operator
    had cordoned the node before the upgrade drained it. #}
{%- from "kos/map.jinja" import kos with context %}
{%- set upgrade = salt['pillar.get']('kos_upgrade', {}) %}

kubeadm-upgrade-begin-file-serialize-pending:
  file.serialize:
    - name: {{ kos.state_dir }}/kubeadm-upgrade-pending.json
    - dataset:
        version: {{ upgrade.version }}
        cordoned: {{ upgrade.cordoned | tojson }}
    - serializer: json
    - makedirs: True
    - mode: '0600'
