{#- salt-run state.orchestrate orch.backup

    A backup of the cluster's datastore (kubeadm: an etcd snapshot,
    https://kubernetes.io/docs/tasks/administer-cluster/configure-upgrade-etcd/#backing-up-an-etcd-cluster;
    microk8s: microk8s dbctl backup, https://microk8s.io/docs/backup-restore) taken on the
    first control plane, sealed there with a key only control planes hold, pushed to the
    master and filed in salt_master:backups:dir, where the newest
    salt_master:backups:keep stay. The master runs this every
    salt_master:backups:every_hours; kos backup runs it on demand. #}
{%- from "orch/sync.jinja" import sync with context %}
{%- from "salt_master/map.jinja" import salt_master with context %}
{%- set kos = salt['pillar.get']('kos', {}) %}
{%- from "kos/map.jinja" import kos as deployment, distribution_error with context %}
{%- set distribution = raise(distribution_error) if distribution_error else deployment.distribution %}
{%- set first = kos.get('first_control_plane') %}
{%- set master_id = kos.get('salt_master', {}).get('id') %}
{%- if not first or not master_id %}

kos-orch-backup-pillar:
  test.fail_without_changes:
    - name: "the pillar names no first control plane or salt master (kos:first_control_plane, kos:salt_master:id): converge the cluster first (kos up)"
{%- else %}
{%- set last = [] %}
{{ sync('kos-orch-backup', [first, master_id], last) }}

kos-orch-backup-take:
  salt.function:
    - name: kos.backup
    - tgt: {{ first }}
    - require:
      - salt: {{ last[-1] }}

kos-orch-backup-kept:
  salt.state:
    - tgt: {{ master_id }}
    - sls: salt_master.backups
    - require:
      - salt: kos-orch-backup-take
{%- endif %}
