{#- On a control plane: cordon and drain the node named in pillar kubeadm_node
    (first step of orch.remove on kubeadm). #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
{%- set node = salt['pillar.get']('kubeadm_node') %}

kubeadm-drain-kubeadm-node_drained:
  kubeadm.node_drained:
    - name: {{ node }}
    - timeout: {{ salt['pillar.get']('kos_remove:drain_timeout') | tojson }}
    - kubeconfig: {{ kubeadm.admin_conf }}
