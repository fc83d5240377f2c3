{%- from "core/map.jinja" import core with context %}
{%- if core.manage.minion %}

core-minion-service-running:
  service.running:
    - name: {{ core.minion_service }}
    - enable: True
{%- endif %}
