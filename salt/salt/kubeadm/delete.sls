{#- On a control plane: delete the Node object named in pillar kubeadm_node once
    that node was reset (last step of orch.remove on kubeadm). #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
{%- set node = salt['pillar.get']('kubeadm_node') %}

kubeadm-delete-kubeadm-node_absent:
  kubeadm.node_absent:
    - name: {{ node }}
    - kubeconfig: {{ kubeadm.admin_conf }}
