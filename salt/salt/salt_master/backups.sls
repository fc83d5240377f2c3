{#- orch.backup's last step, on the master: the sealed backups control planes pushed are
    filed in salt_master:backups:dir (served as saltenv kos-backups), the newest `keep`
    kept. #}
{%- from "salt_master/map.jinja" import salt_master with context %}

salt_master-backups-kept:
  kos.backups_kept:
    - name: {{ salt_master.backups.dir }}
    - incoming: {{ salt_master.cachedir }}/minions
    - keep: {{ salt_master.backups.keep }}
