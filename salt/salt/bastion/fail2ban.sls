{%- from "bastion/map.jinja" import bastion with context %}
include:
  - bastion.packages

bastion-fail2ban-file-managed-jail:
  file.managed:
    - name: {{ bastion.fail2ban.jail_file }}
    - mode: '0644'
    - makedirs: True
    - contents: |
        # Managed by Salt (kos bastion).
        [sshd]
        enabled = true
        backend = systemd
        bantime = {{ bastion.fail2ban.bantime }}
        findtime = {{ bastion.fail2ban.findtime }}
        maxretry = {{ bastion.fail2ban.maxretry }}
    - require:
      - sls: bastion.packages

bastion-fail2ban-service-running:
  service.running:
    - name: fail2ban
    - enable: True
    - watch:
      - file: bastion-fail2ban-file-managed-jail
