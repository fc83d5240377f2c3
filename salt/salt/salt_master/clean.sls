{%- from "salt_master/map.jinja" import salt_master, reconnect with context %}

salt_master-clean-file-absent-config:
  file.absent:
    - name: {{ salt_master.config_file }}

salt_master-clean-reconnect-absent:
  file.absent:
    - names: {{ reconnect.files | tojson }}
