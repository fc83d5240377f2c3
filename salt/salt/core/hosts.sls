{#- Every minion's name and private IP, from the mine (kos_private_ips). #}
{%- from "core/map.jinja" import core with context %}
{%- if core.manage.hosts %}
{%- set ips = salt['mine.get']('*', 'kos_private_ips') %}
{%- set entries = [] %}
{%- for minion_id, addrs in ips | dictsort if addrs %}
{%- do entries.append(addrs[0] ~ ' ' ~ minion_id ~ ' ' ~ minion_id.split('.')[0]) %}
{%- endfor %}

core-hosts-file-blockreplace:
  file.blockreplace:
    - name: {{ core.hosts_file }}
    - marker_start: '# BEGIN kos managed hosts: edits inside this block are overwritten'
    - marker_end: '# END kos managed hosts'
    - content: |
{%- for line in entries %}
        {{ line }}
{%- endfor %}
    - append_if_not_found: True
{%- endif %}
