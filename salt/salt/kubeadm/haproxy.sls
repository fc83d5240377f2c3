{#- The local load balancer on every node: haproxy on 127.0.0.1 in front of every
    control plane's API server, so the API stays reachable when one is lost. Its
    backends are the control planes' private addresses from the mine
    (kos_private_ips); a node that has not reported yet is listed with the address
    Terraform gave it. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
{%- from "kos/map.jinja" import kos with context %}
{%- set mined = salt['mine.get']('*', 'kos_private_ips') %}
{%- set backends = [] %}
{%- for cp in kos.control_planes %}
{%- set addrs = mined.get(cp) or [kos.nodes[cp].ip] %}
{%- do backends.append({'name': kubeadm.node_names[cp], 'address': addrs[0]}) %}
{%- endfor %}
{%- set cfg = kubeadm.haproxy.config_file %}
{%- set pidfile = kubeadm.haproxy.pidfile %}
{%- if kubeadm.manage.packages %}

kubeadm-haproxy-pkg-installed:
  pkg.installed:
    - name: haproxy
{%- endif %}

kubeadm-haproxy-file-managed-config:
  file.managed:
    - name: {{ cfg }}
    - source: salt://kubeadm/files/haproxy.cfg.jinja
    - template: jinja
    - makedirs: True
    - mode: '0644'
    - context:
        backends: {{ backends | tojson }}
    # a broken file never replaces a working one
    - check_cmd: haproxy -c -q -f
{%- if kubeadm.manage.packages %}
    - require:
      - pkg: kubeadm-haproxy-pkg-installed
{%- endif %}
{%- if kubeadm.manage.services %}

kubeadm-haproxy-service-running:
  service.running:
    - name: haproxy
    - enable: True
    - reload: True
    - watch:
      - file: kubeadm-haproxy-file-managed-config
{%- else %}
{#- No service manager owns haproxy here (a container, the test machine): it runs
    from its own pidfile. Reload first, so a fresh start is not reloaded at once. #}
{%- set running = 'test -s ' ~ pidfile ~ ' && grep -qa haproxy /proc/$(cat ' ~ pidfile ~ ')/cmdline' %}

kubeadm-haproxy-cmd-run-reload:
  cmd.run:
    - name: haproxy -D -f {{ cfg }} -p {{ pidfile }} -sf $(cat {{ pidfile }})
    - onlyif: {{ running }}
    - onchanges:
      - file: kubeadm-haproxy-file-managed-config

kubeadm-haproxy-cmd-run-start:
  cmd.run:
    - name: haproxy -D -f {{ cfg }} -p {{ pidfile }}
    - unless: {{ running }}
    - require:
      - file: kubeadm-haproxy-file-managed-config
      - cmd: kubeadm-haproxy-cmd-run-reload
{%- endif %}
