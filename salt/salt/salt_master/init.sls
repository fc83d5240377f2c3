{%- from "salt_master/map.jinja" import salt_master, salt_default_transport, reconnect with context %}

{#- The job cache's filter, the engine that puts a batch's .batch.p (whole returns, past
    the job cache) through it and the reactor's runner are the extension's
    (saltext.kos): installed before the config naming them is, or the master could
    not allocate a job id. #}
include:
  - kos.extension

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
{#- The transport this master runs on now: what its config says (Salt's default before kos
    wrote one). Its minions connect on it; switching the master alone would cut them off. #}
{%- set written = {} %}
{%- if salt['file.file_exists'](salt_master.config_file) %}
{%-   do written.update(salt['file.read'](salt_master.config_file) | load_yaml or {}) %}
{%- endif %}
{%- set running = {'transport': written.get('transport') or salt_default_transport} %}
{%- set minions_dir = salt_master.pki_dir ~ '/minions' %}
{%- set others = [] %}
{%- if running.transport != salt_master.transport and salt['file.directory_exists'](minions_dir) %}
{%-   for name in salt['file.readdir'](minions_dir) if name not in ('.', '..', grains['id']) %}
{%-     do others.append(name) %}
{%-   endfor %}
{%- endif %}
{%- if others %}

salt_master-transport-unchanged:
  test.fail_without_changes:
    - name: >-
        kos:salt_master:transport: this master and its {{ others | length }} minions run
        on {{ running.transport }}, the pillar asks for {{ salt_master.transport }}
        (Terraform sets tcp when syndic_master or top_master is set). Switching the master
        alone would cut its minions off, so nothing was changed. Joining a master of
        masters needs an environment created with syndic_master (or top_master) set;
        unset it again to keep this one as it is.
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
    - require:
      - sls: kos.extension
{%- if others %}
      - test: salt_master-transport-unchanged
{%- endif %}
{%- if salt_master.manage_service %}

{%- if reconnect.wanted %}

salt_master-reconnect-script-managed:
  file.managed:
    - name: {{ reconnect.script }}
    - source: salt://salt_master/files/kos-salt-master-reconnect
    - mode: '0755'

# Each start of the master, whoever starts it, is followed by its minions signing in again.
salt_master-reconnect-unit-managed:
  file.managed:
    - name: {{ reconnect.unit_file }}
    - source: salt://salt_master/files/kos-salt-master-reconnect.service
    - template: jinja
    - context:
        service: {{ salt_master.service }}
        script: {{ reconnect.script }}
    - require:
      - file: salt_master-reconnect-script-managed

# service.enabled reloads systemd for a new unit, not for one that changed
salt_master-reconnect-unit-reloaded:
  cmd.run:
    - name: systemctl daemon-reload
    - onchanges:
      - file: salt_master-reconnect-unit-managed

salt_master-reconnect-unit-enabled:
  service.enabled:
    - name: {{ reconnect.unit }}
    - require:
      - cmd: salt_master-reconnect-unit-reloaded
{%- else %}

salt_master-reconnect-absent:
  file.absent:
    - names: {{ reconnect.files | tojson }}
{%- endif %}

# Restart after this run has returned: restarting the master inside a run
# (orchestration included) would cut that run off. On tcp the restart ends once the minions
# were told to sign in again (kos waits for it).
salt_master-service-restart-deferred:
  cmd.run:
    - name: >-
        systemd-run --on-active=15 --unit=kos-salt-master-restart
        systemctl restart {{ salt_master.service }}{{ ' ' ~ reconnect.unit if reconnect.wanted else '' }}
{%- if reconnect.wanted %}
    - require:
      - service: salt_master-reconnect-unit-enabled
{%- endif %}
    - onchanges:
      - file: salt_master-config-file-managed
      {#- a new release: the returner and engine the master loads at its start #}
      - sls: kos.extension
{%- endif %}
{%- if salt_master.manage_service %}
{%- if salt_master.syndic_master %}

salt_master-syndic-service-running:
  service.running:
    - name: {{ salt_master.syndic.service }}
    - enable: True
    - require:
      - file: salt_master-config-file-managed

# Once the master has restarted on its new config (above, at 15 s), the syndic follows: it
# reads the same config and talks to the master it runs beside.
salt_master-syndic-restart-deferred:
  cmd.run:
    - name: systemd-run --on-active=30 --unit=kos-salt-syndic-restart systemctl restart {{ salt_master.syndic.service }}
    - onchanges:
      - file: salt_master-config-file-managed
    - require:
      - service: salt_master-syndic-service-running
{%- elif salt['service.available'](salt_master.syndic.service) %}

salt_master-syndic-service-dead:
  service.dead:
    - name: {{ salt_master.syndic.service }}
    - enable: False
{%- endif %}
{%- endif %}
