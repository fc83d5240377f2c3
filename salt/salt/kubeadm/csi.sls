{#- The Cinder CSI, from the first control plane: its driver, configuration, controller
    (with the cloud controller's cloud.conf, on the control planes), node service (every
    node, no credential) and StorageClasses, as addons the API server keeps. It needs the
    cloud controller's credential: without kubeadm:ccm it is off. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
include:
  - {{ 'kubeadm.master' if kubeadm.first else 'kubeadm.joined' }}
{%- if kubeadm.csi.enabled and kubeadm.ccm.enabled and kubeadm.first %}
{%- for addon in ('cinder-csi', 'cinder-csi-storage-classes') %}

kubeadm-csi-file-managed-{{ addon }}:
  file.managed:
    - name: {{ kubeadm.addons_dir }}/{{ addon }}.yaml
    - source: salt://kubeadm/files/{{ addon }}.yaml.jinja
    - template: jinja
    - makedirs: True
    - mode: '0644'

kubeadm-csi-kubeadm_node-manifest_applied-{{ addon }}:
  kubeadm_node.manifest_applied:
    - name: {{ kubeadm.addons_dir }}/{{ addon }}.yaml
    - kubeconfig: {{ kubeadm.admin_conf }}
    - require:
      - file: kubeadm-csi-file-managed-{{ addon }}
      - kubeadm: kubeadm-master-kubeadm-initialized
{%- if addon != 'cinder-csi' %}
      - kubeadm_node: kubeadm-csi-kubeadm_node-manifest_applied-cinder-csi
{%- endif %}
{%- endfor %}
{%- endif %}
