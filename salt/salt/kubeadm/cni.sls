{#- The pod network: kube-router as a DaemonSet (BGP between the nodes, no
    encapsulation, network policies, and the service proxy in place of kube-proxy),
    applied from the first control plane. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
{%- if kubeadm.network.mode == 'kube-router' %}
include:
  - kubeadm.master

kubeadm-cni-file-managed-kube_router:
  file.managed:
    - name: {{ kubeadm.addons_dir }}/kube-router.yaml
    - source: salt://kubeadm/files/kube-router.yaml.jinja
    - template: jinja
    - makedirs: True
    - mode: '0644'

kubeadm-cni-kubeadm_node-manifest_applied-kube_router:
  kubeadm_node.manifest_applied:
    - name: {{ kubeadm.addons_dir }}/kube-router.yaml
    - kubeconfig: {{ kubeadm.admin_conf }}
    - require:
      - file: kubeadm-cni-file-managed-kube_router
      - kubeadm: kubeadm-master-kubeadm-initialized
{%- endif %}
