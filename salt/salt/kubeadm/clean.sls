{#- Undo what the kubeadm formula added, in reverse order: leave the cluster, then
    the files, the load balancer and the node settings. Packages stay (held at the
    pinned version): removing them could break what else runs on the node. #}
{%- from "kubeadm/map.jinja" import kubeadm with context %}
include:
  - kubeadm.reset

kubeadm-clean-file-absent-published:
  file.absent:
    - names:
      - {{ kubeadm.join_dir }}
      # digests of the manifests kubeadm_node.manifest_applied applied
      - {{ kubeadm.applied_dir }}
    - require:
      - sls: kubeadm.reset

kubeadm-clean-file-absent-config:
  file.absent:
    - names:
      - {{ kubeadm.config_file }}
      - {{ kubeadm.addons_dir }}
    - require:
      - sls: kubeadm.reset
{%- if kubeadm.manage.services %}

kubeadm-clean-service-dead-haproxy:
  service.dead:
    - name: haproxy
    - enable: False
{%- else %}

kubeadm-clean-cmd-run-haproxy-stop:
  cmd.run:
    - name: kill $(cat {{ kubeadm.haproxy.pidfile }})
    - onlyif: test -s {{ kubeadm.haproxy.pidfile }} && grep -qa haproxy /proc/$(cat {{ kubeadm.haproxy.pidfile }})/cmdline
    - require:
      - sls: kubeadm.reset
{%- endif %}

kubeadm-clean-file-absent-haproxy_config:
  file.absent:
    - name: {{ kubeadm.haproxy.config_file }}
    - require:
      - sls: kubeadm.reset
{%- if kubeadm.manage.sysctl %}

kubeadm-clean-file-absent-sysctl:
  file.absent:
    - name: /etc/sysctl.d/90-kos-kubernetes.conf
{%- endif %}
