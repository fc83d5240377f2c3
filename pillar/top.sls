{#- Layers, general to specific; later files override earlier ones and a missing
    file is skipped (ignore_missing). Minion id = FQDN: hostname.domain.
    Dots cannot appear in an SLS name (Salt reads them as directories), so a
    domain's dots become underscores: prod.example.com -> environments/prod_example_com.sls #}
{%- set hostname, _, domain = opts.id.partition('.') %}
{%- set domain = domain | replace('.', '_') %}
base:
  '*':
    - ignore_missing: True
    - _from_terraform
    {#- Written by kos on the master for control planes only (kos.ccm): the cloud
        controller's application credential; never in this repository. #}
    - _ccm_{{ hostname }}
    - kos.derived
    - environments.defaults
{%- if domain %}
    - environments.{{ domain }}
{%- endif %}
    - minions.defaults.{{ hostname }}
{%- if domain %}
    - minions.{{ domain }}.{{ hostname }}
{%- endif %}
    {#- Written by a cloud whose machines cannot do everything a VM does (kos's local
        rehearsal cloud): last, so no environment turns on what these hosts lack. #}
    - _cloud
