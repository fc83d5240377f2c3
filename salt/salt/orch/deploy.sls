{#- salt-run state.orchestrate orch.deploy [pillar='{"exclude": [...], "limit": [...], "force": true}']

    Waves from need. Every targeted minion says what its converge needs
    (kos.converge_need: never converged, not joined, state tree or pillar sections changed
    since its last converge, new members for /etc/hosts); then:
      1. the first control plane alone, only while it is not initialised;
      2. each control plane that still has to join, one at a time (concurrent joins race),
         with a join credential issued for it alone and revoked once it joined; a first
         control plane whose server was rebuilt (it holds nothing of a cluster while other
         control planes are joined) is one of them: it rejoins through a joined control
         plane, the issuer, which issues every credential of this run;
      3. one parallel wave (batches of kos:orchestration:batch, by default 5 per core of
         the master) of everything else that needs a highstate: workers that join (each
         with its own credential, revoked when the wave ends), joined nodes whose inputs
         changed, the bastion, the master;
      4. the minions that need no highstate but must learn new members: /etc/hosts only
         (kos.learn_members, no state run).
    A pillar change on a converged cluster is one parallel highstate; a converged
    cluster with nothing changed runs none. Before anything changes, every minion taking
    part answers and its pillar is judged valid: in its answer (compiled fresh for it),
    when its extension modules are those of this state tree; otherwise (no answer, or
    last converged with another state tree) it syncs them, refreshes its pillar and
    validates it first. A node whose pillar was judged in its answer refreshes its
    in-memory pillar at the end of its highstate.

    exclude: these minions take part in nothing.
    limit:   only these minions are converged, plus what they need from the issuer of
             join credentials (the first control plane, or the joined control plane a
             rebuilt first control plane rejoins through).
    force:   every targeted minion gets its highstate, whatever changed.
    started: a minion id, set by the master's reactor (salt://reactor/start.sls): converge
             that minion if this deployment expects it and its cluster is up, teach the
             others its address; anything else is logged and does nothing. #}
{#- The master's own pillar, compiled fresh for this run (the orchestrator's id is
    <master>_master: it gets the Terraform layer, which carries the distribution, and no
    environment layer). No minion's cached pillar is read. #}
{%- set kos = salt['pillar.get']('kos', {}) %}
{%- from "kos/map.jinja" import kos as deployment, distribution_error with context %}
{%- set distribution = raise(distribution_error) if distribution_error else deployment.distribution %}
{%- set nodes = kos.get('nodes', {}) %}
{%- set first = kos.get('first_control_plane') %}
{%- set master_id = kos.get('salt_master', {}).get('id') %}
{%- set bastion_id = kos.get('bastion', {}).get('id') %}
{%- set all_control_planes = nodes | dictsort | selectattr('1.role', 'equalto', 'control_plane') | map(attribute='0') | reject('equalto', first) | list %}
{%- set all_workers = nodes | dictsort | selectattr('1.role', 'equalto', 'worker') | map(attribute='0') | list %}
{%- set known = ([master_id, bastion_id, first] + all_control_planes + all_workers) | select | list %}
{%- set settings = kos.get('orchestration') or {} %}
{%- set wave_timeout = settings.get('timeout') or 120 %}
{#- A wave never asks more of the master than it can serve: batches sized by its cores. #}
{%- set batch = settings.get('batch') or ([5, grains.get('num_cpus', 1) * 5] | max) %}
{#- How many minions of ``minions`` one part of a wave holds (batch: a count, or "N%"). #}
{%- macro part_size(minions) -%}
{%- if batch is string -%}
{{ [1, ((minions | length) * (batch[:-1] | float) / 100) | round(0, 'ceil') | int] | max }}
{%- else -%}
{{ batch | int }}
{%- endif -%}
{%- endmacro %}
{%- set exclude = salt['pillar.get']('exclude', []) %}
{%- set limit = salt['pillar.get']('limit', []) %}
{%- set force = salt['pillar.get']('force', False) %}
{%- set started = salt['pillar.get']('started', None) %}
{%- set problems = [] %}
{%- for key, value in [('exclude', exclude), ('limit', limit)] %}
{%- if value is string or value is not sequence or value is mapping %}
{%- do problems.append("pillar key '" ~ key ~ "' must be a list of minion ids, got " ~ value | tojson) %}
{%- else %}
{%- for minion in value if minion not in known %}
{%- do problems.append("pillar key '" ~ key ~ "': " ~ minion | tojson ~ " is not a minion of this deployment; use one of " ~ known | join(', ')) %}
{%- endfor %}
{%- endif %}
{%- endfor %}
{%- if force is not sameas true and force is not sameas false %}
{%- do problems.append("pillar key 'force' must be true or false, got " ~ force | tojson) %}
{%- endif %}
{%- if started is not none and (started is not string or limit) %}
{%- do problems.append("pillar key 'started' (set by the reactor) must be one minion id, without limit, got " ~ started | tojson) %}
{%- endif %}
{%- if problems %}

kos-orch-deploy-options:
  test.fail_without_changes:
    - name: {{ problems | join('; ') | tojson }}
{%- elif started and (started not in known or started in exclude) %}
{%- do salt['log.warning']('kos orch.deploy: minion ' ~ started ~ ' started, but this deployment does not expect it: nothing done') %}

kos-orch-deploy-unexpected:
  test.succeed_without_changes:
    - name: {{ ('minion ' ~ started ~ ' is not a minion of this deployment: nothing done') | tojson }}
{%- else %}
{%- set selected = known | select('in', [started] if started else limit) | list if (started or limit) else known %}
{%- set targets = selected | reject('in', exclude) | list %}
{#- The reactor's new minion is news to every other minion: their /etc/hosts learn it. #}
{%- set others = known | reject('in', exclude) | reject('in', targets) | list if started else [] %}
{#- The control planes always answer too: whether the cluster still lives on them decides
    how a first control plane that holds nothing comes back. #}
{%- set asked = (targets + others + (([first] + all_control_planes) if first and first not in exclude else [])) | unique | reject('in', exclude) | list %}
{#- What the minions converge with now: the state tree this master serves. #}
{%- set files = [] %}
{%- for root in opts.get('file_roots', {}).get(saltenv or 'base', []) %}
{%- do files.extend(salt['file.find'](root, type='f', print='path,md5', regex='^(?!.*\\.pyc$)')) %}
{%- endfor %}
{%- set tree = files | sort | tojson | sha256 %}
{%- set answers = salt['saltutil.cmd'](asked, 'kos.converge_need', arg=[tree], tgt_type='list', timeout=30) if asked else {} %}
{#- A first control plane that answers without kos's modules is a new server: they were
    never synced to it. Whether it holds a cluster decides between initialising it and
    having it rejoin, so while other nodes say they joined it is synced and asked again
    before anything is planned (its modules load with the pillar refresh). #}
{%- set first_said = (answers.get(first) or {}).get('ret') %}
{%- set others_joined = [] %}
{%- for minion, said in answers | dictsort if minion != first and (said or {}).get('ret') is mapping %}
{%- if (said.ret.get('kubernetes') or {}).get('joined') is sameas true %}
{%- do others_joined.append(minion) %}
{%- endif %}
{%- endfor %}
{%- if first in answers and first_said is not mapping and others_joined %}
{%- for kind in ['utils', 'modules'] %}
{%- do salt['saltutil.cmd']([first], 'saltutil.sync_' ~ kind, kwarg={'saltenv': saltenv or 'base', 'refresh': False}, tgt_type='list', timeout=wave_timeout) %}
{%- endfor %}
{%- do salt['saltutil.cmd']([first], 'saltutil.refresh_pillar', kwarg={'wait': True}, tgt_type='list', timeout=wave_timeout) %}
{%- do answers.update(salt['saltutil.cmd']([first], 'kos.converge_need', arg=[tree], tgt_type='list', timeout=30)) %}
{%- set note = first ~ ' answered without kos modules while ' ~ others_joined | join(', ') ~ ' joined' %}
{%- do salt['log.info']('kos orch.deploy: ' ~ note ~ ': synced and asked again') %}
{%- endif %}
{%- set need = {} %}
{%- set joined = {} %}
{#- Minions whose extension modules were synced for this very state tree. #}
{%- set current = [] %}
{%- for minion in asked %}
{%- set answer = (answers.get(minion) or {}).get('ret') %}
{%- set answer = answer if answer is mapping else none %}
{%- set k8s = (answer or {}).get('kubernetes') %}
{%- do need.update({minion: answer}) %}
{%- do joined.update({minion: k8s is mapping and k8s.get('joined') is sameas true}) %}
{%- if answer and answer.get('sync') is sameas false %}
{%- do current.append(minion) %}
{%- endif %}
{%- endfor %}
{%- set first_up = first and joined.get(first, False) %}
{%- if started and not first_up %}
{%- do salt['log.info']('kos orch.deploy: minion ' ~ started ~ ' started before its cluster is up: nothing done (the first converge is kos converge' ~ "'s)") %}

kos-orch-deploy-not-yet:
  test.succeed_without_changes:
    - name: {{ ('minion ' ~ started ~ ' started before its cluster is up: nothing done') | tojson }}
{%- else %}
{#- Why each target needs its highstate (none: it needs none). #}
{%- set why = {} %}
{%- for minion in targets %}
{%- set answer = need.get(minion) %}
{%- if force %}
{%- do why.update({minion: ['forced']}) %}
{%- elif answer is none %}
{%- do why.update({minion: ['it did not say what it needs (kos.converge_need)']}) %}
{%- elif answer.get('highstate') %}
{%- do why.update({minion: answer.highstate}) %}
{%- endif %}
{%- endfor %}
{%- set is_joined = joined | dictsort | selectattr('1') | map(attribute='0') | list %}
{#- A first control plane that holds nothing of a cluster while other nodes are joined to
    it: its server was rebuilt. Initialising it would start a second cluster; it rejoins
    through a joined control plane, the issuer, if there is one. #}
{%- set first_k8s = (need.get(first) or {}).get('kubernetes') or {} %}
{%- set still_joined = is_joined | reject('equalto', first) | list %}
{%- set rebuilt = first in targets and first_k8s.get('fresh') is sameas true and still_joined | length > 0 %}
{%- set issuers = all_control_planes | select('in', still_joined) | list %}
{%- set issuer = issuers[0] if rebuilt and issuers else first %}
{%- set rejoining = [first] if rebuilt and issuers else [] %}
{%- set joining_cps = rejoining + all_control_planes | select('in', targets) | reject('in', is_joined) | list %}
{%- set joining_workers = all_workers | select('in', targets) | reject('in', is_joined) | list %}
{%- set joining = joining_cps + joining_workers %}
{%- set credentials = issuer and issuer not in exclude and joining %}
{#- The first control plane alone: while it is not initialised, and before joins when it
    changes (new SANs or addons must not move under a joining node). #}
{%- set first_alone = first in targets and not rejoining and (not first_up or (first in why and joining)) %}
{%- set wave = targets | select('in', why) | reject('equalto', first if first_alone else none) | reject('in', joining_cps) | list %}
{%- set highstated = wave + joining_cps + ([first] if first_alone else []) %}
{%- set learning = need | dictsort | selectattr('1') | selectattr('1.learn') | map(attribute='0') | list %}
{%- set learners = (targets + others + ([issuer] if credentials else [])) | unique | reject('in', highstated) | select('in', learning) | list %}
{%- set prepared = (highstated + ([issuer] if credentials else [])) | unique | list %}
{%- set everyone = (prepared + learners) | unique | list %}
{#- Extension modules are synced where they may be stale: a minion that did not answer,
    or whose last converge was made of another state tree. #}
{%- set syncing = prepared | reject('in', current) | list %}
{#- Their pillar was judged on the answer's fresh compile: no refresh, no validation job;
    the others (to sync, or forced without a reason of their own) are judged after a
    refresh. Bad pillar anywhere stops the run before anything changes. #}
{%- set invalid = [] %}
{%- set checking = syncing | list %}
{%- for minion in prepared | reject('in', syncing) %}
{%- set problems = (need.get(minion) or {}).get('problems') %}
{%- if problems is none %}
{%- do checking.append(minion) %}
{%- elif problems %}
{%- do invalid.append(minion ~ ': ' ~ problems | join('; ')) %}
{%- endif %}
{%- endfor %}
{#- Whose in-memory pillar no refresh renews before their highstate: it ends with one. #}
{%- set run = {'tree': tree, 'refresh': highstated | reject('in', checking) | list} %}
{%- if issuer != first %}
{%- do run.update({'issuer': issuer}) %}
{%- endif %}
{%- set reasons = [] %}
{%- for minion in highstated | sort %}
{%- do reasons.append(minion ~ ' (' ~ (why.get(minion) or ['not initialised']) | join('; ') ~ ')') %}
{%- endfor %}
{%- set summary = 'highstate: ' ~ reasons | join(', ') if reasons else 'no highstate' %}
{%- if learners %}
{%- set summary = summary ~ '; /etc/hosts learns new members: ' ~ learners | sort | join(', ') %}
{%- endif %}
{%- if rejoining %}
{%- set summary = summary ~ '; ' ~ first ~ ' (rebuilt) rejoins the cluster through ' ~ issuer %}
{%- endif %}
{%- do salt['log.info']('kos orch.deploy: ' ~ summary) %}
{%- if issuer and issuer in exclude and joining %}

kos-orch-deploy-options:
  test.fail_without_changes:
{%- set problem = ('the first control plane ' if issuer == first else 'the issuer ') ~ issuer ~ ' is excluded, but ' ~ joining | join(', ') %}
    - name: {{ (problem ~ ' must join with a credential it issues: do not exclude it') | tojson }}
{%- elif rebuilt and not rejoining %}

kos-orch-deploy-first-control-plane-lost:
  test.fail_without_changes:
{%- set problem = 'the first control plane ' ~ first ~ ' holds no cluster, but ' ~ still_joined | join(', ')
                   ~ ' joined the cluster it initialised' %}
{%- set fix = 'initialising it would start a second cluster, so nothing changed; no other control plane is joined'
               ~ ' for it to rejoin through: bring back its server with its disk, and meanwhile converge the others'
               ~ ' with pillar exclude [' ~ first ~ ']' %}
    - name: {{ (problem ~ ': ' ~ fix) | tojson }}
{%- else %}

# What this run converges and why (the name says it).
kos-orch-deploy-plan:
  test.succeed_without_changes:
    - name: {{ summary | tojson }}
{#- Their answers stand for a ping: one round trip less for every minion. #}
{%- set silent = everyone | reject('in', answers) | list %}
{%- if silent %}

# Nothing changes unless every minion taking part answered what it needs.
kos-orch-deploy-silent:
  test.fail_without_changes:
    - name: {{ ('no answer from ' ~ silent | join(', ') ~ ': start them, or leave them out (pillar exclude)') | tojson }}
    - require:
      - kos-orch-deploy-plan
{%- elif invalid %}

# Bad pillar stops everything here, before any node changes.
kos-orch-deploy-validate:
  test.fail_without_changes:
    - name: {{ ('invalid pillar on ' ~ invalid | join(' | ')) | tojson }}
    - require:
      - kos-orch-deploy-plan
{%- elif everyone %}
{%- set last = ['kos-orch-deploy-plan'] %}
{%- if checking %}
{#- Only the kinds of extension module a minion loads (the formula's engines and returners
    are the master's, installed by the salt_master formula): saltutil.sync_all would ask the
    master for a listing of the whole state tree once for each of its 19 kinds. The pillar
    refresh that follows reloads the minion's modules. #}
{%- for kind in (['utils', 'modules', 'states'] if syncing else []) %}

kos-orch-deploy-sync-{{ kind }}:
  salt.function:
    - name: saltutil.sync_{{ kind }}
    - tgt: {{ syncing | join(',') }}
    - tgt_type: list
    - timeout: {{ wave_timeout }}
    - kwarg:
        saltenv: {{ saltenv or 'base' }}
        refresh: False
    - require:
      - {{ last[-1] }}
{%- do last.append('kos-orch-deploy-sync-' ~ kind) %}
{%- endfor %}

kos-orch-deploy-refresh-pillar:
  salt.function:
    - name: saltutil.refresh_pillar
    - tgt: {{ checking | join(',') }}
    - tgt_type: list
    - timeout: {{ wave_timeout }}
    - kwarg:
        wait: True
    - require:
      - {{ last[-1] }}
{%- do last.append('kos-orch-deploy-refresh-pillar') %}

# Bad pillar stops everything here, before any node changes; a node whose pillar is valid
# puts its private IP in the mine, before any /etc/hosts is written (a node judged by its
# answer put its own there when it was converged first).
kos-orch-deploy-validate:
  salt.function:
    - name: kos.prepare_converge
    - tgt: {{ checking | join(',') }}
    - tgt_type: list
    - timeout: {{ wave_timeout }}
    - require:
      - {{ last[-1] }}
{%- do last.append('kos-orch-deploy-validate') %}
{%- endif %}
{%- if first_alone %}

kos-orch-deploy-first-control-plane:
  salt.state:
    - tgt: {{ first }}
    - highstate: True
    - queue: True
    - timeout: {{ wave_timeout }}
    - pillar:
        kos_orchestration: {{ run | tojson }}
    - require:
      - {{ last[-1] }}
{%- do last.append('kos-orch-deploy-first-control-plane') %}
{%- endif %}
{%- if learners %}
{#- New members, nothing else: /etc/hosts learns them, no highstate. Before any join: the
    first control plane refuses a node whose name it cannot resolve (CLI reference A.7.3).
    One execution-module call, not a state run: no pillar compile on the master and no
    State on the minion (at 50 workers on the rehearsal cloud the state runs took 29.8 s
    of an addition's 79.5). All learners in one job: each asks the mine once and writes
    one file, less than the mine updates every minion sends by itself. They are grouped
    by the members digest they answered, which is the same everywhere unless a host's
    pillar overrides the Terraform layer. #}
{%- set by_members = {} %}
{%- for minion in learners %}
{%- do by_members.setdefault(need[minion].members, []).append(minion) %}
{%- endfor %}
{%- for members, part in by_members | dictsort %}
{%- set sid = 'kos-orch-deploy-learn' ~ ('' if loop.first else '-' ~ loop.index) %}

{{ sid }}:
  salt.function:
    - name: kos.learn_members
    - tgt: {{ part | join(',') }}
    - tgt_type: list
    - timeout: {{ wave_timeout }}
    - kwarg:
        members: {{ members | tojson }}
        saltenv: {{ saltenv or 'base' }}
    - require:
      - {{ last[-1] }}
{%- do last.append(sid) %}
{%- endfor %}
{%- endif %}
{%- for cp in joining_cps %}

kos-orch-deploy-credentials-{{ cp }}:
  salt.state:
    - tgt: {{ issuer }}
    - sls: {{ distribution }}.credentials
    - queue: True
    - timeout: {{ wave_timeout }}
    - pillar:
        kos_orchestration:
          join_nodes: [{{ cp | tojson }}]
    - require:
      - {{ last[-1] }}

kos-orch-deploy-control-plane-{{ cp }}:
  salt.state:
    - tgt: {{ cp }}
    - highstate: True
    - queue: True
    - timeout: {{ wave_timeout }}
    - pillar:
        kos_orchestration: {{ run | tojson }}
    - require:
      - salt: kos-orch-deploy-credentials-{{ cp }}

# Used once: gone as soon as the control plane joined.
kos-orch-deploy-revoke-{{ cp }}:
  salt.state:
    - tgt: {{ issuer }}
    - sls: {{ distribution }}.revoke
    - queue: True
    - timeout: {{ wave_timeout }}
    - pillar:
        kos_orchestration:
          join_nodes: [{{ cp | tojson }}]
    - require:
      - salt: kos-orch-deploy-control-plane-{{ cp }}
{%- do last.append('kos-orch-deploy-revoke-' ~ cp) %}
{%- endfor %}
{%- if joining_workers %}

kos-orch-deploy-credentials-workers:
  salt.state:
    - tgt: {{ issuer }}
    - sls: {{ distribution }}.credentials
    - queue: True
    - timeout: {{ wave_timeout }}
    - pillar:
        kos_orchestration:
          join_nodes: {{ joining_workers | tojson }}
    - require:
      - {{ last[-1] }}
{%- do last.append('kos-orch-deploy-credentials-workers') %}
{%- endif %}
{%- if wave %}
{#- The wave in parts the master can serve, one after the other; a slow master makes it
    wait (salt_master:gather_job_timeout), never fail. Not Salt's own batch: it keeps
    every minion's whole return in a .batch.p beside the job cache, past kos's job-cache
    filter, and at 50 workers it reported 18 highstates that had succeeded as empty. #}
{%- for part in wave | batch(part_size(wave) | int) %}
{%- set sid = 'kos-orch-deploy-wave' ~ ('' if loop.first else '-' ~ loop.index) %}

{{ sid }}:
  salt.state:
    - tgt: {{ part | join(',') }}
    - tgt_type: list
    - highstate: True
    - queue: True
    - timeout: {{ wave_timeout }}
    - pillar:
        kos_orchestration: {{ run | tojson }}
    - require:
      - {{ last[-1] }}
{%- do last.append(sid) %}
{%- endfor %}
{%- endif %}
{%- if credentials %}

# Used once: whatever this run issued is gone when it ends, whether the wave succeeded or
# not (the control planes' went already, unless their join failed).
kos-orch-deploy-revoke:
  salt.state:
    - tgt: {{ issuer }}
    - sls: {{ distribution }}.revoke
    - queue: True
    - timeout: {{ wave_timeout }}
    - pillar:
        kos_orchestration:
          join_nodes: {{ joining | tojson }}
    - order: last
    - require:
      - kos-orch-deploy-plan
{%- endif %}
{%- if first_alone or rejoining %}

# The cluster says it is up (mine kos_kubernetes): from now on the master's reactor
# converges a minion of this deployment that starts.
kos-orch-deploy-cluster-up:
  salt.function:
    - name: mine.update
    - tgt: {{ first }}
    - order: last
    - require:
      - salt: {{ 'kos-orch-deploy-first-control-plane' if first_alone else 'kos-orch-deploy-control-plane-' ~ first }}
{%- endif %}
{%- endif %}
{%- endif %}
{%- endif %}
{%- endif %}
