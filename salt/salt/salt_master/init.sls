{%- from "salt_master/map.jinja" import salt_master with context %}

salt_master-config-file-managed:
  file.managed:
    - name: {{ salt_master.config_file }}
    - source: salt://salt_master/files/kos.conf.jinja
    - template: jinja
    - makedirs: True
    - mode: '0644'
    - context:
        cfg: {{ salt_master | tojson }}
{%- if salt_master.manage_service %}

# Restart after this run has returned: restarting the master inside a run
# (orchestration included) would cut that run off.
salt_master-service-restart-deferred:
  cmd.run:
    - name: systemd-run --on-active=15 --unit=kos-salt-master-restart systemctl restart {{ salt_master.service }}
    - onchanges:
      - file: salt_master-config-file-managed
{%- endif %}
