{#- The routed pod network (kubeadm:network:mode routed): no encapsulation and no network
    plugin of its own. The controller manager gives each node a pod CIDR; this node's pods
    sit on a bridge with addresses from its CIDR (the bridge and host-local CNI plugins),
    and every other node's CIDR is routed via that node's address. The routes follow the
    API's nodes: once here, after this node initialised or joined, and every
    sync_seconds from the minion's scheduler, so a node that joins or leaves, or a reboot,
    needs no orchestration. kube-proxy is the service proxy. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
{%- if kubeadm.network.mode == 'routed' %}
{%- set joined = 'kubeadm-master-kubeadm-initialized' if kubeadm.first else 'kubeadm-joined-kubeadm-joined' %}
include:
  - kubeadm.{{ 'master' if kubeadm.first else 'joined' }}
{%- if kubeadm.first %}

{#- The nodes read every Node object with their own credential (v1.32 and later allow a
    kubelet its own only). #}
kubeadm-network-file-managed-rbac:
  file.managed:
    - name: {{ kubeadm.addons_dir }}/pod-routes-rbac.yaml
    - source: salt://kubeadm/files/pod-routes-rbac.yaml
    - makedirs: True
    - mode: '0644'

kubeadm-network-kubeadm_node-manifest_applied-rbac:
  kubeadm_node.manifest_applied:
    - name: {{ kubeadm.addons_dir }}/pod-routes-rbac.yaml
    - kubeconfig: {{ kubeadm.admin_conf }}
    - require:
      - file: kubeadm-network-file-managed-rbac
      - kubeadm: kubeadm-master-kubeadm-initialized
    - require_in:
      - kubeadm_node: kubeadm-network-kubeadm_node-pod_network_routed
{%- endif %}

kubeadm-network-kubeadm_node-pod_network_routed:
  kubeadm_node.pod_network_routed:
    - name: {{ kubeadm.node_name }}
    - cluster_cidr: {{ kubeadm.pod_cidr }}
    - kube_dir: {{ kubeadm.kube_dir }}
    - require:
      - kubeadm: {{ joined }}

kubeadm-network-schedule-present-pod_routes:
  schedule.present:
    - name: kos-pod-routes
    - function: kos_podnet.sync_pod_network
    - job_kwargs:
        node_name: {{ kubeadm.node_name }}
        cluster_cidr: {{ kubeadm.pod_cidr }}
        kube_dir: {{ kubeadm.kube_dir }}
    - seconds: {{ kubeadm.network.sync_seconds }}
    - return_job: False
    - persist: True
    - require:
      - kubeadm_node: kubeadm-network-kubeadm_node-pod_network_routed
{%- else %}

kubeadm-network-schedule-absent-pod_routes:
  schedule.absent:
    - name: kos-pod-routes
{%- endif %}
