{#- The first control-plane node: SANs, addons, and a join token published in the
    mine for the other nodes (microk8s.credentials). #}
include:
  - microk8s
  - microk8s.sans
  - microk8s.addons
  - microk8s.credentials

extend:
  microk8s-credentials-microk8s-join_token_published:
    microk8s.join_token_published:
      - require:
        - sls: microk8s.sans
        - sls: microk8s.addons
