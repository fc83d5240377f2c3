{#- On the node orch.remove takes out: microk8s leave (a control plane leaves dqlite too).
    Its server stays until Terraform destroys it. #}

microk8s-remove-leave-microk8s-cluster_left:
  microk8s.cluster_left:
    - name: microk8s
