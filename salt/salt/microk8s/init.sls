{#- Every microk8s node: the snap from the pinned channel, running and ready, with the
    cluster's pod and service networks. #}
{%- from "microk8s/map.jinja" import microk8s with context %}
{%- from "kos/map.jinja" import kos with context %}
{%- set first = kos.initialises %}

{#- microk8s's documented way to set the pod and service CIDRs of a new node (1.28+) is a
    launch configuration at $SNAP_COMMON/.microk8s.yaml, in place before the snap is
    installed: extraCNIEnv IPv4_CLUSTER_CIDR / IPv4_SERVICE_CIDR, with the first service
    address among the extra SANs (https://microk8s.io/docs/ref-launch-config,
    https://microk8s.io/docs/how-to-dual-stack). It is read at installation only: a node
    installed with other networks keeps them (https://microk8s.io/docs/change-cidr). #}
microk8s-init-file-managed-launch_config:
  file.managed:
    - name: {{ microk8s.snap_common }}/.microk8s.yaml
    - makedirs: True
    - mode: '0600'
    - contents: |
        # Managed by Salt (kos microk8s formula); read by microk8s when the snap is installed.
        ---
        version: 0.1.0
        extraCNIEnv:
          IPv4_SUPPORT: true
          IPv4_CLUSTER_CIDR: {{ microk8s.pod_cidr }}
          IPv4_SERVICE_CIDR: {{ microk8s.service_cidr }}
        extraSANs:
          - {{ microk8s.api_service_ip }}

{%- if first %}

{#- Installing the snap is what initialises the first control plane's cluster: a rebuilt
    one never starts a second cluster beside the one the other nodes joined. #}
microk8s-init-kos-sole_cluster:
  kos.sole_cluster:
    - name: {{ kos.first_control_plane }}
{%- endif %}

{#- A node is installed from microk8s:channel; an installed node keeps its channel here:
    moving a cluster to another version is orch.upgrade's (kos upgrade), one node at a
    time, each drained first. #}
microk8s-init-snap-installed:
  snap.installed:
    - name: microk8s
    - channel: {{ microk8s.channel }}
    - classic: True
    - refresh: False
    # The microk8s module only loads once the command exists.
    - reload_modules: True
    - require:
      - file: microk8s-init-file-managed-launch_config
{%- if first %}
      - kos: microk8s-init-kos-sole_cluster
{%- endif %}

# snapd would otherwise refresh every node within its track on its own schedule, all at
# once and undrained.
microk8s-init-snap-held:
  snap.held:
    - name: microk8s
    - require:
      - snap: microk8s-init-snap-installed

microk8s-init-microk8s-running:
  microk8s.running:
    - name: microk8s
    - timeout: {{ microk8s.ready_timeout }}
    - require:
      - snap: microk8s-init-snap-installed
