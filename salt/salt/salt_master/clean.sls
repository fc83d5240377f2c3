{%- from "salt_master/map.jinja" import salt_master with context %}

salt_master-clean-file-absent-config:
  file.absent:
    - name: {{ salt_master.config_file }}
