{%- from "salt_master/map.jinja" import salt_master with context %}

salt_master-clean-file-absent-config:
  file.absent:
    - name: {{ salt_master.config_file }}

# Only once no config names it.
salt_master-clean-file-absent-job_cache:
  file.absent:
    - name: {{ salt_master.cachedir }}/extmods/returners/kos_job_cache.py
    - require:
      - file: salt_master-clean-file-absent-config

salt_master-clean-file-absent-batch_scrub:
  file.absent:
    - name: {{ salt_master.cachedir }}/extmods/engines/kos_batch_scrub.py
    - require:
      - file: salt_master-clean-file-absent-config
