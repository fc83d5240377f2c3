{#- On the node orch.upgrade upgrades: noted as pending (so a re-run after a failure
    finishes it, uncordon included, and knows whether the operator had cordoned the node
    before the upgrade drained it), then refreshed to kos_upgrade:channel and running
    again. The hold stays: an explicit refresh passes it. #}
{%- from "kos/map.jinja" import kos with context %}
{%- set upgrade = salt['pillar.get']('kos_upgrade', {}) %}

microk8s-upgrade-refresh-file-serialize-pending:
  file.serialize:
    - name: {{ kos.state_dir }}/upgrade-pending.json
    - dataset:
        channel: {{ upgrade.channel }}
        cordoned: {{ upgrade.cordoned | tojson }}
    - serializer: json
    - makedirs: True
    - mode: '0600'

microk8s-upgrade-refresh-snap-installed:
  snap.installed:
    - name: microk8s
    - channel: {{ upgrade.channel }}
    - classic: True
    - require:
      - file: microk8s-upgrade-refresh-file-serialize-pending

microk8s-upgrade-refresh-microk8s-running:
  microk8s.running:
    - name: microk8s
    - timeout: {{ upgrade.ready_timeout }}
    - require:
      - snap: microk8s-upgrade-refresh-snap-installed
