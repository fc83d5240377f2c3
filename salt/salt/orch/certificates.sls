{#- salt-run state.orchestrate orch.certificates [pillar='{"force": true}']

    Renews the control planes' Kubernetes certificates that expire within
    kos:certificates:warn_days (every one they can, with force), one control plane after
    the other, the first control plane first: each restarts its control-plane components
    and answers again before the next begins, so the API stays up behind the others. A
    control plane that fails stops the run; the ones after it are left as they were, and
    a re-run renews only what is still due. #}
{%- from "orch/sync.jinja" import sync with context %}
{%- set kos = salt['pillar.get']('kos', {}) %}
{%- from "kos/map.jinja" import kos as deployment, distribution_error with context %}
{%- set distribution = raise(distribution_error) if distribution_error else deployment.distribution %}
{%- set nodes = kos.get('nodes', {}) %}
{%- set first = kos.get('first_control_plane') %}
{%- set others = nodes | dictsort | selectattr('1.role', 'equalto', 'control_plane') | map(attribute='0') | reject('equalto', first) | list %}
{%- set force = salt['pillar.get']('force', False) %}
{%- if force is not sameas true and force is not sameas false %}

kos-orch-certificates-options:
  test.fail_without_changes:
    - name: {{ ("pillar key 'force' must be true or false, got " ~ force | tojson) | tojson }}
{%- else %}
{%- set control_planes = ([first] if first else []) + others %}
{%- set last = [] %}
{#- The states and modules this run uses, as this master serves them (a cluster converged
    by an older formula has none of them yet). #}
{%- if control_planes %}
{{ sync('kos-orch-certificates', control_planes, last) }}
{%- endif %}
{%- for cp in control_planes %}

kos-orch-certificates-{{ cp }}:
  salt.state:
    - tgt: {{ cp }}
    - sls: {{ distribution }}.certificates
    - queue: True
    - pillar:
        kos_orchestration:
          force_renewal: {{ force | tojson }}
    - require:
      - salt: {{ last[-1] }}
{%- do last.append('kos-orch-certificates-' ~ cp) %}
{%- endfor %}
{%- endif %}
