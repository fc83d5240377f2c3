{%- from "core/map.jinja" import core with context %}
{%- if core.manage.limits %}

core-limits-file-managed:
  file.managed:
    - name: {{ core.limits_file }}
    - mode: '0644'
    - contents: |
        # Managed by Salt (kos core): open files limit for every login.
        *    soft nofile {{ core.nofile_limit }}
        *    hard nofile {{ core.nofile_limit }}
        root soft nofile {{ core.nofile_limit }}
        root hard nofile {{ core.nofile_limit }}
{%- endif %}
