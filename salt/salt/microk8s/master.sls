{#- The first control-plane node: SANs and addons. Join credentials are issued per
    node by the orchestration (microk8s.credentials), not here. #}
include:
  - microk8s
  - microk8s.sans
  - microk8s.addons
