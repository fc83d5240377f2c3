{#- Undo the bastion formula in reverse order: fail2ban's jail, the NAT and forwarding
    rules (the FORWARD policy back to ACCEPT), IP forwarding. The packages stay: other
    software may use iptables and fail2ban. #}
{%- from "bastion/map.jinja" import bastion with context %}
{%- from "kos/map.jinja" import kos with context %}
{%- set private_cidr = kos.networks.private_cidr %}

bastion-clean-file-absent-jail:
  file.absent:
    - name: {{ bastion.fail2ban.jail_file }}

bastion-clean-service-running-fail2ban:
  service.running:
    - name: fail2ban
    - onlyif:
      - fun: service.available
        args:
          - fail2ban
    - watch:
      - file: bastion-clean-file-absent-jail

bastion-clean-iptables-set_policy-forward-accept:
  iptables.set_policy:
    - table: filter
    - chain: FORWARD
    - policy: ACCEPT
    - save: {{ bastion.rules_file }}

bastion-clean-iptables-delete-forward-back:
  iptables.delete:
    - table: filter
    - chain: FORWARD
    - in-interface: {{ bastion.public_interface }}
    - out-interface: {{ bastion.private_interface }}
    - match: conntrack
    - ctstate: ESTABLISHED,RELATED
    - jump: ACCEPT
    - save: {{ bastion.rules_file }}
    - require:
      - iptables: bastion-clean-iptables-set_policy-forward-accept

bastion-clean-iptables-delete-forward-out:
  iptables.delete:
    - table: filter
    - chain: FORWARD
    - in-interface: {{ bastion.private_interface }}
    - out-interface: {{ bastion.public_interface }}
    - source: {{ private_cidr }}
    - jump: ACCEPT
    - save: {{ bastion.rules_file }}
    - require:
      - iptables: bastion-clean-iptables-set_policy-forward-accept

bastion-clean-iptables-delete-masquerade:
  iptables.delete:
    - table: nat
    - chain: POSTROUTING
    - source: {{ private_cidr }}
    - out-interface: {{ bastion.public_interface }}
    - jump: MASQUERADE
    - save: {{ bastion.rules_file }}
    - require:
      - iptables: bastion-clean-iptables-delete-forward-out
      - iptables: bastion-clean-iptables-delete-forward-back

# Forwarding off now, and the file that turned it on at boot gone.
bastion-clean-sysctl-present-ip_forward:
  sysctl.present:
    - name: net.ipv4.ip_forward
    - value: 0
    - config: {{ bastion.sysctl_file }}
    - onlyif:
      - fun: file.file_exists
        path: {{ bastion.sysctl_file }}
    - require:
      - iptables: bastion-clean-iptables-delete-masquerade

bastion-clean-file-absent-sysctl:
  file.absent:
    - name: {{ bastion.sysctl_file }}
    - require:
      - sysctl: bastion-clean-sysctl-present-ip_forward
