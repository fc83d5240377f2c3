{%- from "salt_master/map.jinja" import salt_master, extmods, reconnect with context %}

salt_master-clean-file-absent-config:
  file.absent:
    - name: {{ salt_master.config_file }}

# Only once no config names them.
{%- for kind, module in extmods %}

salt_master-clean-file-absent-{{ module }}:
  file.absent:
    - name: {{ salt_master.cachedir }}/extmods/{{ kind }}/{{ module }}.py
    - require:
      - file: salt_master-clean-file-absent-config
{%- endfor %}

salt_master-clean-reconnect-absent:
  file.absent:
    - names: {{ reconnect.files | tojson }}
