{#- salt-run state.orchestrate orch.deploy
    Order: salt master, bastion, first control plane (init, token in the mine),
    further control planes one at a time (concurrent joins race), then all workers. #}
{%- set kos = salt['pillar.get']('kos', {}) %}
{%- set nodes = kos.get('nodes', {}) %}
{%- set first = kos.get('first_control_plane') %}
{%- set master_id = kos.get('salt_master', {}).get('id') %}
{%- set bastion_id = kos.get('bastion', {}).get('id') %}
{%- set control_planes = nodes | dictsort | selectattr('1.role', 'equalto', 'control_plane') | map(attribute='0') | reject('equalto', first) | list %}
{%- set workers = nodes | dictsort | selectattr('1.role', 'equalto', 'worker') | map(attribute='0') | list %}
{%- set everyone = ([master_id, bastion_id, first] + control_planes + workers) | select | list %}
{%- set batch = salt['pillar.get']('kos:orchestration:batch', None) %}
{#- The environment layer that picks the distribution is not part of the master's
    own pillar: the first control plane's cached pillar has it. #}
{%- set distribution = 'microk8s' %}
{%- if first %}
{%- set cached = salt['saltutil.runner']('cache.pillar', tgt=first) or {} %}
{%- set distribution = ((cached.get(first) or {}).get('kubernetes') or {}).get('distribution', 'microk8s') %}
{%- endif %}
{#- kubeadm: fresh join credentials from the first control plane before every wave,
    revoked after the last one. #}
{%- set kubeadm = distribution == 'kubeadm' and first %}

kos-orch-deploy-sync:
  salt.function:
    - name: saltutil.sync_all
    - tgt: {{ everyone | join(',') }}
    - tgt_type: list
    - kwarg:
        refresh: True

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
{%- for step, target in [('salt-master', master_id), ('bastion', bastion_id), ('first-control-plane', first)] if target %}

kos-orch-deploy-{{ step }}:
  salt.state:
    - tgt: {{ target }}
    - highstate: True
    - require:
      - salt: {{ last[-1] }}
{%- do last.append('kos-orch-deploy-' ~ step) %}
{%- endfor %}
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
      - salt: kos-orch-deploy-first-control-plane
{%- endif %}
