{%- from "core/map.jinja" import core with context %}
{%- if core.manage.banners %}
{%- for path in core.issue_files %}

core-banners-file-managed-{{ path }}:
  file.managed:
    - name: {{ path }}
    - mode: '0644'
    - contents: {{ core.issue | tojson }}
{%- endfor %}

core-banners-file-managed-motd:
  file.managed:
    - name: {{ core.motd_file }}
    - mode: '0644'
    - contents: {{ core.motd | tojson }}
{%- endif %}
