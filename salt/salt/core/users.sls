{%- from "core/map.jinja" import core with context %}
{%- if core.manage.users %}
{%- for user in core.users %}

core-users-user-present-{{ user.name }}:
  user.present:
    - name: {{ user.name }}
    - shell: {{ user.get('shell', '/bin/bash') }}
    - createhome: True

core-users-ssh_auth-manage-{{ user.name }}:
  ssh_auth.manage:
    - user: {{ user.name }}
    - ssh_keys: {{ user.get('ssh_keys', []) | tojson }}
    - require:
      - user: core-users-user-present-{{ user.name }}

core-users-file-sudoers-{{ user.name }}:
{%- if user.get('sudo', False) %}
  file.managed:
    - name: {{ core.sudoers_dir }}/kos-{{ user.name }}
    - mode: '0440'
    - contents: "{{ user.name }} ALL=(ALL) NOPASSWD:ALL\n"
    - check_cmd: /usr/sbin/visudo -c -f
{%- else %}
  file.absent:
    - name: {{ core.sudoers_dir }}/kos-{{ user.name }}
{%- endif %}
{%- endfor %}
{%- endif %}
