{#- Last in every highstate (and after /etc/hosts learned new members): when the
    orchestration ran it (it passes the state tree's digest as kos_orchestration:tree),
    the node notes what this converge was made of, unless a state failed; the next
    orchestration converges it again only when something of that changed. A node the
    orchestration did not refresh before (kos_orchestration:refresh) refreshes its
    in-memory pillar then. #}
{%- set run = salt['pillar.get']('kos_orchestration', {}) %}
{%- if run.get('tree') %}

kos-converged-kos-converged:
  kos.converged:
    - name: {{ run.tree }}
    - members_only: {{ run.get('learn', False) }}
    - refresh_pillar: {{ grains['id'] in run.get('refresh', []) }}
    - order: last
{%- endif %}
