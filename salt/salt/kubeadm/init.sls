{#- Every kubeadm node: prepared for the kubelet, with a local load balancer in
    front of all control planes. #}
include:
  - kubeadm.prepare
  - kubeadm.haproxy
