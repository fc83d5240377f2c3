{%- from "core/map.jinja" import core with context %}
{%- if core.manage.sysctl %}
{%- set settings = dict(core.sysctl) %}
{%- if core.ipv6_disabled %}
{%- do settings.update({'net.ipv6.conf.all.disable_ipv6': 1, 'net.ipv6.conf.default.disable_ipv6': 1}) %}
{%- endif %}
{#- In a container only the network namespace's sysctls are its own; the others
    belong to the machine it runs on and cannot be written from inside. #}
{%- set container = grains.get('virtual') in ('systemd-nspawn', 'container') %}
{%- for name, value in settings | dictsort if not container or name.startswith('net.') %}

core-sysctl-sysctl-present-{{ name }}:
  sysctl.present:
    - name: {{ name }}
    - value: {{ value }}
    - config: /etc/sysctl.d/90-kos.conf
{%- endfor %}
{%- endif %}
