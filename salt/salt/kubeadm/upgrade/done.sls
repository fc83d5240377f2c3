{#- On the node orch.upgrade upgraded, once it is Ready and uncordoned: nothing pending. #}
{%- from "kos/map.jinja" import kos with context %}

kubeadm-upgrade-done-file-absent-pending:
  file.absent:
    - name: {{ kos.state_dir }}/kubeadm-upgrade-pending.json
