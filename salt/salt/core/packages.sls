{%- from "core/map.jinja" import core with context %}
{%- if core.manage.packages and core.packages %}

core-packages-pkg-installed:
  pkg.installed:
    - pkgs: {{ core.packages | tojson }}
{%- endif %}
