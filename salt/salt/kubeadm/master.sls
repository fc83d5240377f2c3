{#- The first control plane: kubeadm init behind the local load balancer, the pod
    network, the cloud controller, and join credentials in the mine for the nodes
    that still have to join. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
include:
  - kubeadm
  - kubeadm.cni
  - kubeadm.ccm
  - kubeadm.credentials

kubeadm-master-file-managed-config:
  file.managed:
    - name: {{ kubeadm.config_file }}
    - source: salt://kubeadm/files/kubeadm-config.yaml.jinja
    - template: jinja
    - makedirs: True
    - mode: '0600'

kubeadm-master-kubeadm-initialized:
  kubeadm.initialized:
    - name: {{ kubeadm.config_file }}
    - timeout: {{ kubeadm.ready_timeout }}
    - kube_dir: {{ kubeadm.kube_dir }}
    - require:
      - file: kubeadm-master-file-managed-config
      - sls: kubeadm.prepare
      - sls: kubeadm.haproxy
