{#- Cluster-wide addons, applied on the first control-plane node. #}
{%- from "microk8s/map.jinja" import microk8s with context %}
include:
  - microk8s
{%- for name, spec in microk8s.addons | dictsort %}
{%- set spec = spec if spec is mapping else {'enabled': spec} %}

microk8s-addons-microk8s_addons-addon-{{ name }}:
{%- if spec.get('enabled', True) %}
  microk8s_addons.addon_enabled:
{%- else %}
  microk8s_addons.addon_disabled:
{%- endif %}
    - name: {{ name }}
    - record: {{ microk8s.addons_record }}
{%- if spec.get('args') %}
    - args: {{ spec.args | tojson }}
{%- endif %}
    - require:
      - microk8s: microk8s-init-microk8s-running
{%- endfor %}
