{#- On a control plane: its certificates renewed when one expires within
    kos:certificates:warn_days (or whatever is left, with the orchestration's
    kos_orchestration:force_renewal), then its static control-plane Pods restarted.
    orch.certificates runs it on one control plane at a time. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}

kubeadm-certificates-kubeadm_node-certificates_renewed:
  kubeadm_node.certificates_renewed:
    - name: control-plane certificates
    - within_days: {{ salt['kos.certificate_warn_days']() }}
    - force: {{ salt['pillar.get']('kos_orchestration:force_renewal', False) | tojson }}
    - timeout: {{ kubeadm.ready_timeout }}
    - kube_dir: {{ kubeadm.kube_dir }}
