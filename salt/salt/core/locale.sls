{%- from "core/map.jinja" import core with context %}
{%- if core.manage.locale %}

core-locale-locale-system:
  locale.system:
    - name: {{ core.locale }}
{%- endif %}
