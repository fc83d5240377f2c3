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
    when it last converged with this state tree (the extension's release is part of it);
    otherwise (no answer, or another state tree) it installs the master's release of the
    extension (kos.extension), refreshes its pillar and validates it first. A node whose
    pillar was judged in its answer refreshes its in-memory pillar at the end of its
    highstate.

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
{#- The plan is the planner's (the runner saltext.kos.runners.kos_plan, unit tested on its
    own), called with ``inputs`` in this process through salt://orch/planner.py and Salt's
    py renderer: the orchestration's ``salt`` loads execution modules, not runners.
    Rendering reads and asks, and changes nothing: what changes a minion is a step below. #}
{%- set planner = 'salt://orch/planner.py' %}
{%- set options = {} %}
{%- for key, default in [('exclude', []), ('limit', []), ('force', False), ('started', None)] %}
{%- do options.update({key: salt['pillar.get'](key, default)}) %}
{%- endfor %}
{%- set inputs = {'kos': kos, 'options': options, 'cores': grains.get('num_cpus', 1)} %}
{%- set plan = salt['slsutil.renderer'](planner, default_renderer='py', saltenv=saltenv or 'base', inputs=inputs) %}
{%- if not plan.stop %}
{#- What the minions converge with now: the state tree this master serves. #}
{%- set files = [] %}
{%- for root in opts.get('file_roots', {}).get(saltenv or 'base', []) %}
{%- do files.extend(salt['file.find'](root, type='f', print='path,md5', regex='^(?!.*\\.pyc$)')) %}
{%- endfor %}
{%- set tree = files | sort | tojson | sha256 %}
{%- set answers = {} %}
{%- if plan.ask %}
{%- for minion, said in salt['saltutil.cmd'](plan.ask, 'kos.converge_need', arg=[tree], tgt_type='list', timeout=30) | dictsort %}
{%- do answers.update({minion: said.get('ret') if said is mapping else said}) %}
{%- endfor %}
{%- endif %}
{%- do inputs.update({'answers': answers, 'tree': tree}) %}
{%- set plan = salt['slsutil.renderer'](planner, default_renderer='py', saltenv=saltenv or 'base', inputs=inputs) %}
{%- endif %}
{%- for level, message in plan.log %}
{%- do salt['log.' ~ level](message) %}
{%- endfor %}
{%- if plan.stop %}

{{ plan.stop.id }}:
  test.{{ 'succeed_without_changes' if plan.stop.result else 'fail_without_changes' }}:
    - name: {{ plan.stop.name | tojson }}
{%- else %}
{%- set wave_timeout = plan.timeout %}

# What this run converges and why (the name says it).
kos-orch-deploy-plan:
  test.succeed_without_changes:
    - name: {{ plan.summary | tojson }}
{%- if plan.silent %}

# Nothing changes unless every minion taking part answered what it needs.
kos-orch-deploy-silent:
  test.fail_without_changes:
    - name: {{ ('no answer from ' ~ plan.silent | join(', ') ~ ': start them, or leave them out (pillar exclude)') | tojson }}
    - require:
      - kos-orch-deploy-plan
{%- elif plan.invalid %}

# Bad pillar stops everything here, before any node changes.
kos-orch-deploy-validate:
  test.fail_without_changes:
    - name: {{ ('invalid pillar on ' ~ plan.invalid | join(' | ')) | tojson }}
    - require:
      - kos-orch-deploy-plan
{%- elif plan.everyone %}
{%- set last = ['kos-orch-deploy-plan'] %}
{%- if plan.check %}
{%- if plan.sync %}

# The master's release of the extension where a minion may lack it; the pillar refresh that
# follows reloads the minion's modules.
kos-orch-deploy-extension:
  salt.state:
    - tgt: {{ plan.sync | join(',') }}
    - tgt_type: list
    - sls: kos.extension
    - saltenv: {{ saltenv or 'base' }}
    - timeout: {{ wave_timeout }}
    - require:
      - {{ last[-1] }}
{%- do last.append('kos-orch-deploy-extension') %}
{%- endif %}

kos-orch-deploy-refresh-pillar:
  salt.function:
    - name: saltutil.refresh_pillar
    - tgt: {{ plan.check | join(',') }}
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
    - tgt: {{ plan.check | join(',') }}
    - tgt_type: list
    - timeout: {{ wave_timeout }}
    - require:
      - {{ last[-1] }}
{%- do last.append('kos-orch-deploy-validate') %}
{%- endif %}
{%- if plan.first %}

kos-orch-deploy-first-control-plane:
  salt.state:
    - tgt: {{ plan.first }}
    - highstate: True
    - queue: True
    - timeout: {{ wave_timeout }}
    - pillar:
        kos_orchestration: {{ plan.run | tojson }}
    - require:
      - {{ last[-1] }}
{%- do last.append('kos-orch-deploy-first-control-plane') %}
{%- endif %}
{%- if plan.learn %}
{#- New members, nothing else: /etc/hosts learns them, no highstate. Before any join: the
    first control plane refuses a node whose name it cannot resolve (microk8s' cluster
    agent looks the joining node's hostname up before it admits it).
    One execution-module call, not a state run: no pillar compile on the master and no
    State on the minion, which were most of an addition's time at 50 workers. All learners
    in one job: each asks the mine once and writes one file, less than the mine updates
    every minion sends by itself. They are grouped
    by the members digest they answered, which is the same everywhere unless a host's
    pillar overrides the Terraform layer. #}
{%- for learning in plan.learn %}
{%- set sid = 'kos-orch-deploy-learn' ~ ('' if loop.first else '-' ~ loop.index) %}

{{ sid }}:
  salt.function:
    - name: kos.learn_members
    - tgt: {{ learning.minions | join(',') }}
    - tgt_type: list
    - timeout: {{ wave_timeout }}
    - kwarg:
        members: {{ learning.members | tojson }}
        saltenv: {{ saltenv or 'base' }}
    - require:
      - {{ last[-1] }}
{%- do last.append(sid) %}
{%- endfor %}
{%- endif %}
{%- for cp in plan.control_planes %}

kos-orch-deploy-credentials-{{ cp }}:
  salt.state:
    - tgt: {{ plan.issuer }}
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
        kos_orchestration: {{ plan.run | tojson }}
    - require:
      - salt: kos-orch-deploy-credentials-{{ cp }}

# Used once: gone as soon as the control plane joined.
kos-orch-deploy-revoke-{{ cp }}:
  salt.state:
    - tgt: {{ plan.issuer }}
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
{%- if plan.workers %}

kos-orch-deploy-credentials-workers:
  salt.state:
    - tgt: {{ plan.issuer }}
    - sls: {{ distribution }}.credentials
    - queue: True
    - timeout: {{ wave_timeout }}
    - pillar:
        kos_orchestration:
          join_nodes: {{ plan.workers | tojson }}
    - require:
      - {{ last[-1] }}
{%- do last.append('kos-orch-deploy-credentials-workers') %}
{%- endif %}
{%- if plan.wave %}
{#- The wave in parts the master can serve, one after the other; a slow master makes it
    wait (salt_master:gather_job_timeout), never fail. Not Salt's own batch: it keeps
    every minion's whole return in a .batch.p beside the job cache, past kos's job-cache
    filter, and at 50 workers it reported 18 highstates that had succeeded as empty. #}
{%- for part in plan.wave %}
{%- set sid = 'kos-orch-deploy-wave' ~ ('' if loop.first else '-' ~ loop.index) %}

{{ sid }}:
  salt.state:
    - tgt: {{ part | join(',') }}
    - tgt_type: list
    - highstate: True
    - queue: True
    - timeout: {{ wave_timeout }}
    - pillar:
        kos_orchestration: {{ plan.run | tojson }}
    - require:
      - {{ last[-1] }}
{%- do last.append(sid) %}
{%- endfor %}
{%- endif %}
{%- if plan.spread and distribution == 'kubeadm' %}

# Cluster DNS survives any one node: kubeadm deployed CoreDNS's two replicas while the
# first control plane was the only node, and joins never move them. (microk8s' dns addon
# runs one replica.)
kos-orch-deploy-spread:
  salt.state:
    - tgt: {{ plan.spread }}
    - sls: kubeadm.spread
    - queue: True
    - timeout: {{ wave_timeout }}
    - require:
      - {{ last[-1] }}
{%- endif %}
{%- if plan.revoke %}

# Used once: whatever this run issued is gone when it ends, whether the wave succeeded or
# not (the control planes' went already, unless their join failed).
kos-orch-deploy-revoke:
  salt.state:
    - tgt: {{ plan.issuer }}
    - sls: {{ distribution }}.revoke
    - queue: True
    - timeout: {{ wave_timeout }}
    - pillar:
        kos_orchestration:
          join_nodes: {{ plan.revoke | tojson }}
    - order: last
    - require:
      - kos-orch-deploy-plan
{%- endif %}
{%- if plan.cluster_up %}

# The cluster says it is up (mine kos_kubernetes): from now on the master's reactor
# converges a minion of this deployment that starts.
kos-orch-deploy-cluster-up:
  salt.function:
    - name: mine.update
    - tgt: {{ kos.first_control_plane }}
    - order: last
    - require:
      - salt: {{ 'kos-orch-deploy-first-control-plane' if plan.first else 'kos-orch-deploy-control-plane-' ~ kos.first_control_plane }}
{%- endif %}
{%- endif %}
{%- endif %}
