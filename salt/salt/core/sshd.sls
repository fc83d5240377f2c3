{%- from "core/map.jinja" import core with context %}
{%- if core.manage.sshd %}

core-sshd-file-managed-config:
  file.managed:
    - name: {{ core.sshd.config_file }}
    - source: salt://core/files/sshd_config.jinja
    - template: jinja
    - mode: '0644'
    - context:
        sshd: {{ core.sshd | tojson }}
    # sshd refuses to start on a broken config: test it before it replaces the old one.
    - check_cmd: /usr/sbin/sshd -t -f

core-sshd-service-running:
  service.running:
    - name: {{ core.sshd.service }}
    - enable: True
    - reload: True
    - watch:
      - file: core-sshd-file-managed-config
{%- endif %}
