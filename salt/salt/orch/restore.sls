{#- salt-run state.orchestrate orch.restore [pillar='{"backup": "etcd-k8s-cp-1-20261127T180000Z.kosbak"}']

    Puts the cluster's datastore back as a backup of orch.backup left it. Default: the
    newest backup in salt_master:backups:dir.
    microk8s: the first control plane writes the backup's objects back into the running
    datastore (microk8s dbctl restore, https://microk8s.io/docs/backup-restore); dqlite replicates them.
    kubeadm: every etcd member restored from the same snapshot
    (https://kubernetes.io/docs/tasks/administer-cluster/configure-upgrade-etcd/#restoring-an-etcd-cluster):
      1. every control plane fetches the sealed backup from the master (saltenv
         kos-backups), opens it and restores it beside its data directory: nothing running
         changes, and a control plane that cannot stops the run here;
      2. every control plane stops its API server and etcd member;
      3. each puts the restored data in place (the old kept as <data dir>.before-restore-*);
      4. each starts them again and its API server answers.
    A re-run after a failure starts again at 1 and finishes. Objects made after the backup
    are gone afterwards; the nodes' kubelets and Pods carry on. #}
{%- from "orch/sync.jinja" import sync with context %}
{%- from "salt_master/map.jinja" import salt_master with context %}
{%- set kos = salt['pillar.get']('kos', {}) %}
{%- from "kos/map.jinja" import kos as deployment, distribution_error with context %}
{%- set distribution = raise(distribution_error) if distribution_error else deployment.distribution %}
{%- set nodes = kos.get('nodes', {}) %}
{%- set control_planes = nodes | dictsort | selectattr('1.role', 'equalto', 'control_plane') | map(attribute='0') | list %}
{%- set dir = salt_master.backups.dir %}
{#- oldest first, by the UTC time that ends each name #}
{%- set dated = [] %}
{%- if salt['file.directory_exists'](dir) %}
{%- for f in salt['file.readdir'](dir) if f.endswith('.kosbak') %}
{%- do dated.append([f.rsplit('-', 1)[-1], f]) %}
{%- endfor %}
{%- endif %}
{%- set have = dated | sort | map(attribute=1) | list %}
{%- set chosen = salt['pillar.get']('backup', '') %}
{%- set problems = [] %}
{%- if not control_planes %}
{%- do problems.append("the pillar lists no control plane (kos:nodes): converge the cluster first (kos up)") %}
{%- elif chosen and chosen not in have %}
{%- do problems.append("there is no backup " ~ chosen | tojson ~ " in " ~ dir ~ " on the master; there are: " ~ (have | join(', ') or 'none')) %}
{%- elif not have %}
{%- do problems.append("there is no backup in " ~ dir ~ " on the master: take one first (kos backup, or salt-run state.orchestrate orch.backup)") %}
{%- endif %}
{%- if problems %}

kos-orch-restore-refused:
  test.fail_without_changes:
    - name: {{ problems | join('; ') | tojson }}
{%- else %}
{%- set backup = chosen or have[-1] %}
{%- set members = [] %}
{%- for cp in control_planes %}
{%- do members.append(cp.split('.')[0] | lower ~ '=https://' ~ nodes[cp].ip ~ ':2380') %}
{%- endfor %}
{%- set last = [] %}
{%- if distribution == 'microk8s' %}
{%- set first = kos.get('first_control_plane') %}
{{ sync('kos-orch-restore', [first], last) }}

kos-orch-restore-dqlite:
  salt.function:
    - name: kos.restore_dqlite
    - tgt: {{ first }}
    - kwarg:
        source: salt://{{ backup }}
    - require:
      - salt: {{ last[-1] }}
{%- else %}
{{ sync('kos-orch-restore', control_planes, last) }}

kos-orch-restore-stage:
  salt.function:
    - name: kos_etcd.etcd_restore_stage
    - tgt: {{ control_planes | join(',') }}
    - tgt_type: list
    - kwarg:
        source: salt://{{ backup }}
        initial_cluster: {{ members | join(',') }}
        token: kos-restore-{{ backup[:-7] }}
    - require:
      - salt: {{ last[-1] }}
{%- set previous = ['kos-orch-restore-stage'] %}
{%- for step, fun in [('stop', 'control_plane_stopped'), ('swap', 'etcd_restore_swap'), ('start', 'control_plane_started')] %}

kos-orch-restore-{{ step }}:
  salt.function:
    - name: kos_etcd.{{ fun }}
    - tgt: {{ control_planes | join(',') }}
    - tgt_type: list
    - require:
      - salt: {{ previous[-1] }}
{%- do previous.append('kos-orch-restore-' ~ step) %}
{%- endfor %}
{%- endif %}
{%- endif %}
