{%- from "core/map.jinja" import core with context %}
{%- if core.manage.resolver and core.nameservers %}

core-resolver-file-managed-resolv_conf:
  file.managed:
    - name: {{ core.resolv_conf }}
    - mode: '0644'
    - follow_symlinks: False
    - contents: |
        # Managed by Salt (kos core).
{%- if core.search %}
        search {{ core.search | join(' ') }}
{%- endif %}
{%- for ns in core.nameservers %}
        nameserver {{ ns }}
{%- endfor %}
{%- endif %}
