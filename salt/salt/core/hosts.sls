{%- from "core/map.jinja" import core with context %}
{%- if core.manage.hosts %}
{%- import "core/hosts.jinja" as block with context %}
{%- set text = block.block_lines().strip() %}

core-hosts-file-blockreplace:
  file.blockreplace:
    - name: {{ core.hosts_file }}
    - marker_start: {{ block.marker_start | tojson }}
    - marker_end: {{ block.marker_end | tojson }}
    - content: {{ (text ~ '\n' if text else '') | tojson }}
    - append_if_not_found: True
{%- endif %}
