{%- from "file_transfer/map.jinja" import file_transfer with context %}
{%- for f in file_transfer.files | reverse %}

file_transfer-clean-file-absent-{{ f.path }}:
  file.absent:
    - name: {{ f.path }}
{%- endfor %}
