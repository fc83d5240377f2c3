{#- The first control-plane node: SANs and addons. Join credentials are issued per
    node by the orchestration (microk8s.credentials), not here. #}
include:
  - microk8s
  - microk8s.sans
  - microk8s.addons

# The one token for every node that earlier versions published (join.json) is revoked.
microk8s-master-microk8s-join_credentials_absent-shared:
  microk8s.join_credentials_absent:
    - name: shared join token
    - nodes: []
