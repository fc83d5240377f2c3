{%- from "file_transfer/map.jinja" import file_transfer with context %}
{%- for f in file_transfer.files %}

file_transfer-file-managed-{{ f.path }}:
  file.managed:
    - name: {{ f.path }}
    - source: {{ f.source }}
    - mode: '{{ f.get('mode', '0644') }}'
    - user: {{ f.get('user', 'root') }}
    - group: {{ f.get('group', 'root') }}
    - makedirs: {{ f.get('makedirs', True) }}
{%- endfor %}
