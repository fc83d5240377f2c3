{%- from "bastion/map.jinja" import bastion with context %}
{%- from "kos/map.jinja" import kos with context %}

bastion-clean-file-absent-jail:
  file.absent:
    - name: {{ bastion.fail2ban.jail_file }}

bastion-clean-iptables-delete-masquerade:
  iptables.delete:
    - table: nat
    - chain: POSTROUTING
    - source: {{ kos.networks.private_cidr }}
    - out-interface: {{ bastion.public_interface }}
    - jump: MASQUERADE
    - save: {{ bastion.rules_file }}

bastion-clean-sysctl-forwarding-file-absent:
  file.absent:
    - name: {{ bastion.sysctl_file }}
