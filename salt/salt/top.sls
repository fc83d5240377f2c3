{#- Roles come from the pillar (kos:roles, derived from the Terraform layer). #}
{%- set roles = salt['pillar.get']('kos:roles', []) %}
{%- set distribution = salt['pillar.get']('kubernetes:distribution', 'microk8s') %}
base:
  '*':
    - kos.validate
    - core
    - file_transfer
{%- if roles %}
  '{{ grains['id'] }}':
{%- if 'salt_master' in roles %}
    - salt_master
{%- endif %}
{%- if 'bastion' in roles %}
    - bastion
{%- endif %}
{%- if 'first_control_plane' in roles %}
    - {{ distribution }}.master
{%- elif 'control_plane' in roles or 'worker' in roles %}
    - {{ distribution }}.joined
{%- endif %}
{%- endif %}
