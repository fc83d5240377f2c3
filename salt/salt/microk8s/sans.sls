{#- Control-plane nodes: extra IP SANs (floating IP, admin IP) in the API certificate. #}
{%- from "microk8s/map.jinja" import microk8s with context %}
include:
  - microk8s

microk8s-sans-microk8s_certs-extra_sans:
  microk8s_certs.extra_sans:
    - name: csr.conf.template
    - sans: {{ microk8s.all_sans | tojson }}
    - snap_data: {{ microk8s.snap_data }}
    - require:
      - microk8s: microk8s-init-microk8s-running
