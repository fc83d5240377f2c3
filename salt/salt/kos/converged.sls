{#- Last in every highstate: when the orchestration ran it (it passes the state tree's
    digest as kos_orchestration:tree), the node notes what this converge was made of,
    and the hosts block core.hosts wrote (kos.learn_members rewrites it when only the
    deployment's members change), unless a state failed; the next orchestration converges
    it again only when something of that changed. A node the orchestration did not
    refresh before (kos_orchestration:refresh) refreshes its in-memory pillar then. #}
{%- from "core/map.jinja" import core with context %}
{%- import "core/hosts.jinja" as block with context %}
{%- set run = salt['pillar.get']('kos_orchestration', {}) %}
{%- if run.get('tree') %}
{%- set hosts = {'file': core.hosts_file, 'start': block.marker_start,
                 'end': block.marker_end} if core.manage.hosts else None %}

kos-converged-kos-converged:
  kos.converged:
    - name: {{ run.tree }}
    - hosts: {{ hosts | tojson }}
    - refresh_pillar: {{ grains['id'] in run.get('refresh', []) }}
    - by: {{ run.get('by', 'orchestration') }}
    - order: last
{%- endif %}
