{#- On the issuer, once orch.deploy's joins are done: CoreDNS's replicas spread over the
    nodes, so that cluster DNS survives any one of them. kubeadm deploys them while the
    first control plane is the only node and the scheduler never moves a running Pod. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}

kubeadm-spread-kubeadm_node-replicas_spread:
  kubeadm_node.replicas_spread:
    - name: coredns
    - selector: k8s-app=kube-dns
    - kubeconfig: {{ kubeadm.admin_conf | tojson }}
