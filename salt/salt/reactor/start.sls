{#- salt/minion/<id>/start, on the master (salt_master:reactor). A minion kos expects
    that starts once its cluster is up is converged by orch.deploy (pillar started:
    <id>): its own highstate after the credentials it needs, /etc/hosts on the others.
    Renders on every minion start, so it decides from the master's caches only (the
    minion's cached pillar, the first control plane's mine) and starts an orchestration
    only when there is something to do; anything else is logged. Keys are never accepted
    here: a start event comes only from a minion whose key kos accepted. #}
{%- set minion = data.get('id', '') %}
{%- set cached = salt['saltutil.runner']('cache.pillar', tgt=minion, tgt_type='list') or {} %}
{%- set kos = (cached.get(minion) or {}).get('kos') or {} %}
{%- set first = kos.get('first_control_plane') %}
{%- if not kos.get('roles') %}
{%- do salt['log.warning']('kos reactor: minion ' ~ minion ~ ' started, but no deployment expects it (no kos:roles in its pillar): nothing done') %}
{%- else %}
{%- set mine = salt['saltutil.runner']('mine.get', tgt=first, fun='kos_kubernetes', tgt_type='list') or {} %}
{%- set cluster = mine.get(first) or {} %}
{%- if cluster.get('initialised') is not sameas true %}
{%- do salt['log.info']('kos reactor: minion ' ~ minion ~ ' started before its cluster is up: nothing done (the first converge is kos converge' ~ "'s)") %}
{%- else %}

kos-reactor-start-orch-deploy:
  runner.state.orchestrate:
    - args:
      - mods: orch.deploy
      - pillar:
          started: {{ minion | tojson }}
{%- endif %}
{%- endif %}
