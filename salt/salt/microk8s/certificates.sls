{#- On a control plane: its server and front-proxy client certificates renewed when one
    expires within kos:certificates:warn_days (or both, with the orchestration's
    kos_orchestration:force_renewal). orch.certificates runs it on one control plane at a
    time. #}

microk8s-certificates-microk8s_certs-certificates_renewed:
  microk8s_certs.certificates_renewed:
    - name: control-plane certificates
    - within_days: {{ salt['kos.certificate_warn_days']() }}
    - force: {{ salt['pillar.get']('kos_orchestration:force_renewal', False) | tojson }}
