{#- salt-run state.orchestrate orch.deploy [pillar='{"exclude": [<minion id>, ...], "limit": [<minion id>, ...]}']
    Order: every targeted minion answers, then salt master, bastion, first control plane
    (init, join credentials in the mine), further control planes one at a time
    (concurrent joins race), then all workers.
    exclude: these minions take part in no step.
    limit: only these minions are converged, plus what they need from the first control
    plane (its join credentials) when it is not among them. #}
{#- The master's own pillar, compiled fresh for this run (the orchestrator's id is
    <master>_master: it gets the Terraform layer, which carries the distribution, and no
    environment layer). No minion's cached pillar is read. #}
{%- set kos = salt['pillar.get']('kos', {}) %}
{%- set distribution = kos.get('distribution') or salt['pillar.get']('kubernetes:distribution', 'microk8s') %}
{%- set nodes = kos.get('nodes', {}) %}
{%- set first = kos.get('first_control_plane') %}
{%- set master_id = kos.get('salt_master', {}).get('id') %}
{%- set bastion_id = kos.get('bastion', {}).get('id') %}
{%- set all_control_planes = nodes | dictsort | selectattr('1.role', 'equalto', 'control_plane') | map(attribute='0') | reject('equalto', first) | list %}
{%- set all_workers = nodes | dictsort | selectattr('1.role', 'equalto', 'worker') | map(attribute='0') | list %}
{%- set known = ([master_id, bastion_id, first] + all_control_planes + all_workers) | select | list %}
{%- set exclude = salt['pillar.get']('exclude', []) %}
{%- set limit = salt['pillar.get']('limit', []) %}
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
{%- if problems %}

kos-orch-deploy-options:
  test.fail_without_changes:
    - name: {{ problems | join('; ') | tojson }}
{%- else %}
{%- set selected = known | select('in', limit) | list if limit else known %}
{%- set targets = selected | reject('in', exclude) | list %}
{%- set control_planes = all_control_planes | select('in', targets) | list %}
{%- set workers = all_workers | select('in', targets) | list %}
{%- set first_in = first in targets %}
{#- Joining nodes need the first control plane's credentials even when it is not converged. #}
{%- set credentials_from_first = first and first not in exclude and (control_planes or workers) %}
{%- set everyone = targets + ([first] if credentials_from_first and not first_in else []) %}
{%- set batch = salt['pillar.get']('kos:orchestration:batch', None) %}
{#- kubeadm: fresh join credentials from the first control plane before every wave,
    revoked after the last one. #}
{%- set kubeadm = distribution == 'kubeadm' and (first_in or credentials_from_first) %}
{%- if not everyone %}

kos-orch-deploy-nothing:
  test.succeed_without_changes:
    - name: every minion is excluded
{%- else %}

# Nothing changes unless every minion a step targets answers; the comment names the silent.
kos-orch-deploy-ping:
  salt.function:
    - name: test.ping
    - tgt: {{ everyone | join(',') }}
    - tgt_type: list
    - expect_minions: True
    - timeout: 30

kos-orch-deploy-sync:
  salt.function:
    - name: saltutil.sync_all
    - tgt: {{ everyone | join(',') }}
    - tgt_type: list
    - kwarg:
        refresh: True
    - require:
      - salt: kos-orch-deploy-ping

kos-orch-deploy-refresh-pillar:
  salt.function:
    - name: saltutil.refresh_pillar
    - tgt: {{ everyone | join(',') }}
    - tgt_type: list
    - kwarg:
        wait: True
    - require:
      - salt: kos-orch-deploy-sync

# Bad pillar stops everything here, before any node changes.
kos-orch-deploy-validate:
  salt.function:
    - name: kos.validate_pillar
    - tgt: {{ everyone | join(',') }}
    - tgt_type: list
    - require:
      - salt: kos-orch-deploy-refresh-pillar

# Every node's private IP in the mine before any /etc/hosts is written.
kos-orch-deploy-mine:
  salt.function:
    - name: mine.update
    - tgt: {{ everyone | join(',') }}
    - tgt_type: list
    - require:
      - salt: kos-orch-deploy-validate
{%- set last = ['kos-orch-deploy-mine'] %}
{%- for step, target in [('salt-master', master_id), ('bastion', bastion_id), ('first-control-plane', first)] if target in targets %}

kos-orch-deploy-{{ step }}:
  salt.state:
    - tgt: {{ target }}
    - highstate: True
    - require:
      - salt: {{ last[-1] }}
{%- do last.append('kos-orch-deploy-' ~ step) %}
{%- endfor %}
{%- if credentials_from_first and not first_in and not kubeadm %}

kos-orch-deploy-first-control-plane-credentials:
  salt.state:
    - tgt: {{ first }}
    - sls: {{ distribution }}.credentials
    - require:
      - salt: {{ last[-1] }}
{%- do last.append('kos-orch-deploy-first-control-plane-credentials') %}
{%- endif %}
{%- for cp in control_planes %}
{%- if kubeadm %}

kos-orch-deploy-kubeadm-credentials-{{ cp }}:
  salt.state:
    - tgt: {{ first }}
    - sls: kubeadm.credentials
    - require:
      - salt: {{ last[-1] }}
{%- do last.append('kos-orch-deploy-kubeadm-credentials-' ~ cp) %}
{%- endif %}

kos-orch-deploy-control-plane-{{ cp }}:
  salt.state:
    - tgt: {{ cp }}
    - highstate: True
    - require:
      - salt: {{ last[-1] }}
{%- do last.append('kos-orch-deploy-control-plane-' ~ cp) %}
{%- endfor %}
{%- if workers and kubeadm %}

kos-orch-deploy-kubeadm-credentials-workers:
  salt.state:
    - tgt: {{ first }}
    - sls: kubeadm.credentials
    - require:
      - salt: {{ last[-1] }}
{%- do last.append('kos-orch-deploy-kubeadm-credentials-workers') %}
{%- endif %}
{%- if workers %}

kos-orch-deploy-workers:
  salt.state:
    - tgt: {{ workers | join(',') }}
    - tgt_type: list
    - highstate: True
{%- if batch %}
    - batch: {{ batch }}
{%- endif %}
    - require:
      - salt: {{ last[-1] }}
{%- endif %}
{%- if kubeadm %}

# Also after a failed wave: no join credential outlives the deploy.
kos-orch-deploy-kubeadm-revoke:
  salt.state:
    - tgt: {{ first }}
    - sls: kubeadm.revoke
    - order: last
    - require:
      - salt: kos-orch-deploy-mine
{%- endif %}
{%- endif %}
{%- endif %}
