{%- from "bastion/map.jinja" import bastion with context %}

bastion-packages-pkg-installed:
{%- if bastion.packages %}
  pkg.installed:
    - pkgs: {{ bastion.packages | tojson }}
{%- else %}
  test.nop: []
{%- endif %}
