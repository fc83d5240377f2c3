{#- After the last join wave (applied by the orchestration on the first control
    plane): delete the wave's tokens and the kubeadm-certs Secret, drop the
    published files and refresh the mine, so no join credential outlives its use. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}

kubeadm-revoke-kubeadm-join_credentials_absent:
  kubeadm.join_credentials_absent:
    - name: {{ kubeadm.join_file }}
    - certificate_key_file: {{ kubeadm.control_plane_join_file }}
    - description: {{ kubeadm.token_description | tojson }}
    - kube_dir: {{ kubeadm.kube_dir }}

kubeadm-revoke-module-run-mine-update:
  module.run:
    - mine.update: []
    - onchanges:
      - kubeadm: kubeadm-revoke-kubeadm-join_credentials_absent
