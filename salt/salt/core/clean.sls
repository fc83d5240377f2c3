{#- Undo what core added, in reverse order. Users and packages stay: removing them
    could lock operators out or break other software. #}
{%- from "core/map.jinja" import core with context %}
{%- import "core/hosts.jinja" as block with context %}
{%- for user in core.users | reverse %}

core-clean-file-absent-sudoers-{{ user.name }}:
  file.absent:
    - name: {{ core.sudoers_dir }}/kos-{{ user.name }}
{%- endfor %}

core-clean-file-blockreplace-hosts:
  file.blockreplace:
    - name: {{ core.hosts_file }}
    - marker_start: {{ block.marker_start | tojson }}
    - marker_end: {{ block.marker_end | tojson }}
    - content: ''

core-clean-file-absent-limits:
  file.absent:
    - name: {{ core.limits_file }}

core-clean-file-absent-sysctl:
  file.absent:
    - name: /etc/sysctl.d/90-kos.conf
