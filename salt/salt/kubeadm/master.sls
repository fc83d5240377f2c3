{#- The first control plane: kubeadm init behind the local load balancer, the pod
    network and the cloud controller. Join credentials are issued per node by the
    orchestration (kubeadm.credentials), not here. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
{%- from "kos/map.jinja" import kos with context %}
include:
  - kubeadm
  - kubeadm.cni
  - kubeadm.network
  - kubeadm.ccm
  - kubeadm.csi

kubeadm-master-file-managed-config:
  file.managed:
    - name: {{ kubeadm.config_file }}
    - source: salt://kubeadm/files/kubeadm-config.yaml.jinja
    - template: jinja
    - makedirs: True
    - mode: '0600'

# A rebuilt first control plane never initialises a second cluster beside the one the
# other nodes joined.
kubeadm-master-kos-sole_cluster:
  kos.sole_cluster:
    - name: {{ kos.first_control_plane }}

kubeadm-master-kubeadm-initialized:
  kubeadm.initialized:
    - name: {{ kubeadm.config_file }}
    - timeout: {{ kubeadm.ready_timeout }}
    - kube_dir: {{ kubeadm.kube_dir }}
    - require:
      - file: kubeadm-master-file-managed-config
      - kos: kubeadm-master-kos-sole_cluster
      - sls: kubeadm.prepare
      - sls: kubeadm.haproxy

# kubeadm init's own token goes: every node joins with a token issued for it alone.
kubeadm-master-kubeadm_join-credentials_absent-shared:
  kubeadm_join.credentials_absent:
    - name: shared join credentials
    - nodes: []
    - description: {{ kubeadm.token_description | tojson }}
    - kube_dir: {{ kubeadm.kube_dir }}
    - require:
      - kubeadm: kubeadm-master-kubeadm-initialized
