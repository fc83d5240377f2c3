{#- The OpenStack cloud-controller-manager as a static Pod on every control plane:
    a DaemonSet could not start before the pod network, which waits for the nodes
    the cloud controller initializes. Its cloud.conf holds the cloud credentials
    (pillar only control planes get) and is readable by root only. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
{%- set member = 'kubeadm-master-kubeadm-initialized' if kubeadm.first else 'kubeadm-joined-kubeadm-joined' %}
include:
  - {{ 'kubeadm.master' if kubeadm.first else 'kubeadm.joined' }}
{%- if kubeadm.ccm.enabled and kubeadm.role == 'control_plane' %}

kubeadm-ccm-file-managed-cloud_conf:
  file.managed:
    - name: {{ kubeadm.ccm.cloud_conf }}
    - source: salt://kubeadm/files/cloud.conf.jinja
    - template: jinja
    - makedirs: True
    - user: root
    - group: root
    - mode: '0600'
    # credentials: never in the state's changes
    - show_changes: False

# kubeadm join wants an empty manifests directory: the Pod comes after the join.
kubeadm-ccm-file-managed-static_pod:
  file.managed:
    - name: {{ kubeadm.manifests_dir }}/openstack-cloud-controller-manager.yaml
    - source: salt://kubeadm/files/openstack-cloud-controller-manager.yaml.jinja
    - template: jinja
    - mode: '0600'
    - require:
      - kubeadm: {{ member }}
      - file: kubeadm-ccm-file-managed-cloud_conf
{%- if kubeadm.first %}

kubeadm-ccm-file-managed-rbac:
  file.managed:
    - name: {{ kubeadm.addons_dir }}/openstack-cloud-controller-manager-rbac.yaml
    - source: salt://kubeadm/files/openstack-cloud-controller-manager-rbac.yaml.jinja
    - template: jinja
    - makedirs: True
    - mode: '0644'

kubeadm-ccm-kubeadm_node-manifest_applied-rbac:
  kubeadm_node.manifest_applied:
    - name: {{ kubeadm.addons_dir }}/openstack-cloud-controller-manager-rbac.yaml
    - kubeconfig: {{ kubeadm.admin_conf }}
    - require:
      - file: kubeadm-ccm-file-managed-rbac
      - kubeadm: {{ member }}
{%- endif %}
{%- endif %}
