{%- from "salt_master/map.jinja" import salt_master with context %}

# The job cache and the mine hold what minions returned and published: root only. Salt
# creates these 0755 and, once they exist, never changes their mode.
{%- for key, dir in [('cachedir', salt_master.cachedir), ('jobs', salt_master.cachedir ~ '/jobs')] %}

salt_master-init-file-directory-{{ key }}:
  file.directory:
    - name: {{ dir }}
    - user: root
    - mode: '0700'
    - makedirs: True
{%- endfor %}
{%- if salt_master.job_cache_filter %}

# The master loads returners from its extension modules; it must be there before the
# config naming it is, or the master could not allocate a job id.
salt_master-init-file-managed-job_cache:
  file.managed:
    - name: {{ salt_master.cachedir }}/extmods/returners/kos_job_cache.py
    - source: salt://_returners/kos_job_cache.py
    - makedirs: True
    - mode: '0644'

# A batch's .batch.p holds whole returns, past the job cache: this engine scrubs it.
salt_master-init-file-managed-batch_scrub:
  file.managed:
    - name: {{ salt_master.cachedir }}/extmods/engines/kos_batch_scrub.py
    - source: salt://_engines/kos_batch_scrub.py
    - makedirs: True
    - mode: '0644'
{%- endif %}

salt_master-config-file-managed:
  file.managed:
    - name: {{ salt_master.config_file }}
    - source: salt://salt_master/files/kos.conf.jinja
    - template: jinja
    - makedirs: True
    - mode: '0644'
    - context:
        cfg: {{ salt_master | tojson }}
{%- if salt_master.job_cache_filter %}
    - require:
      - file: salt_master-init-file-managed-job_cache
      - file: salt_master-init-file-managed-batch_scrub
{%- endif %}
{%- if salt_master.manage_service %}

# Restart after this run has returned: restarting the master inside a run
# (orchestration included) would cut that run off.
salt_master-service-restart-deferred:
  cmd.run:
    - name: systemd-run --on-active=15 --unit=kos-salt-master-restart systemctl restart {{ salt_master.service }}
    - onchanges:
      - file: salt_master-config-file-managed
{%- if salt_master.job_cache_filter %}
      - file: salt_master-init-file-managed-job_cache
      - file: salt_master-init-file-managed-batch_scrub
{%- endif %}
{%- endif %}
