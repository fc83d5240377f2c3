{#- On the drained node orch.upgrade upgrades
    (https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/
    #upgrade-worker-nodes): the kubeadm package at kos_upgrade:package_version first,
    then kubeadm upgrade apply (the first control plane) or upgrade node (every other
    node), then the kubelet and kubectl packages and
    the kubelet restarted on them, Ready on kos_upgrade:version. The packages stay held.
    pkgs.k8s.io has one repository per minor version: where kos owns the node's packages
    (kubeadm:manage:packages) the repository line moves first. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
{%- set upgrade = salt['pillar.get']('kos_upgrade', {}) %}
{%- if kubeadm.manage.packages %}

kubeadm-upgrade-node-pkgrepo-managed-kubernetes:
  pkgrepo.managed:
    - name: deb [signed-by={{ upgrade.repo.keyring }}] {{ upgrade.repo.url }} /
    - file: /etc/apt/sources.list.d/kubernetes.list
    - key_url: {{ upgrade.repo.key_url }}
    - aptkey: False
    - require_in:
      - kubeadm_upgrade: kubeadm-upgrade-node-kubeadm_upgrade-packages-kubeadm
{%- endif %}

kubeadm-upgrade-node-kubeadm_upgrade-packages-kubeadm:
  kubeadm_upgrade.packages:
    - name: {{ upgrade.package_version | string | tojson }}
    - pkgs:
      - kubeadm

{%- if upgrade.get('archive_dir') %}

# No registry: the target's images (its control plane, kube-proxy, CoreDNS, pause) are in
# containerd before kubeadm looks for them.
kubeadm-upgrade-node-kubeadm_node-images_imported:
  kubeadm_node.images_imported:
    - name: {{ upgrade.archive_dir }}
    - require_in:
      - kubeadm_upgrade: kubeadm-upgrade-node-kubeadm_upgrade-upgraded
{%- endif %}

kubeadm-upgrade-node-kubeadm_upgrade-upgraded:
  kubeadm_upgrade.upgraded:
    - name: {{ upgrade.version }}
    - node: {{ upgrade.node }}
    - first: {{ upgrade.first | tojson }}
    - kubeconfig: {{ kubeadm.admin_conf }}
    - require:
      - kubeadm_upgrade: kubeadm-upgrade-node-kubeadm_upgrade-packages-kubeadm

kubeadm-upgrade-node-kubeadm_upgrade-packages-kubelet:
  kubeadm_upgrade.packages:
    - name: {{ upgrade.package_version | string | tojson }}
    - pkgs:
      - kubelet
      - kubectl
    - require:
      - kubeadm_upgrade: kubeadm-upgrade-node-kubeadm_upgrade-upgraded

kubeadm-upgrade-node-kubeadm_upgrade-kubelet_restarted:
  kubeadm_upgrade.kubelet_restarted:
    - name: {{ upgrade.node }}
    - version: {{ upgrade.version }}
    - timeout: {{ upgrade.ready_timeout }}
    - require:
      - kubeadm_upgrade: kubeadm-upgrade-node-kubeadm_upgrade-packages-kubelet
