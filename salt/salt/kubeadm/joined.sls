{#- Every other node joins the cluster through its own local load balancer, with the
    credential its issuer (kos.issuer: the first control plane, or another joined one
    while a rebuilt first control plane rejoins) published in the mine. Control planes
    also run the cloud controller. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
{%- from "kos/map.jinja" import kos with context %}
include:
  - kubeadm
  - kubeadm.network
{%- if kubeadm.role == 'control_plane' %}
  - kubeadm.ccm
{%- endif %}

kubeadm-joined-kubeadm-joined:
  kubeadm.joined:
    - name: {{ kos.issuer }}
    - api_server_endpoint: {{ kubeadm.control_plane_endpoint }}
    - role: {{ kubeadm.role }}
    - node_name: {{ kubeadm.node_name }}
{%- if kubeadm.role == 'control_plane' %}
    - advertise_address: {{ kubeadm.node_ip }}
    - bind_port: {{ kubeadm.api.bind_port }}
{%- endif %}
    - cri_socket: {{ kubeadm.cri_socket }}
    - kubelet_extra_args: {{ kubeadm.kubelet_extra_args | tojson }}
    - discovery_timeout: {{ kubeadm.discovery_timeout }}
    - timeout: {{ kubeadm.ready_timeout }}
    - stacked_etcd: {{ kubeadm.stacked_etcd }}
    - kube_dir: {{ kubeadm.kube_dir }}
    - require:
      - sls: kubeadm.prepare
      - sls: kubeadm.haproxy
