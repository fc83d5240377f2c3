{#- On the node that leaves: kubeadm reset (a control plane also leaves etcd),
    then the cloud configuration this formula wrote. Drain it before and delete its
    Node after, from a control plane: orch.remove does all three. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}

kubeadm-reset-kubeadm-reset:
  kubeadm.reset:
    - name: {{ kubeadm.node_name }}
    - kube_dir: {{ kubeadm.kube_dir }}

kubeadm-reset-file-absent-cloud_conf:
  file.absent:
    - name: {{ kubeadm.ccm.cloud_conf }}
    - require:
      - kubeadm: kubeadm-reset-kubeadm-reset
