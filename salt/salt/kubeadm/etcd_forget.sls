{#- On the first control plane: remove from etcd the member of the control plane named
    in pillar kubeadm_node, which is gone and cannot leave by itself (orch.remove with
    force; a live node leaves etcd in its own kubeadm reset). kos_remove:peer_url also
    matches a member whose join never started it. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}

kubeadm-etcd_forget-kubeadm-etcd_member_absent:
  kubeadm.etcd_member_absent:
    - name: {{ salt['pillar.get']('kubeadm_node') }}
    - peer_url: {{ salt['pillar.get']('kos_remove:peer_url') | tojson }}
    - kube_dir: {{ kubeadm.kube_dir }}
