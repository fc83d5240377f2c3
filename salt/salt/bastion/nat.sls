{#- The private network reaches out through the bastion; nothing comes in but replies. #}
{%- from "bastion/map.jinja" import bastion, kos with context %}
{%- set private_cidr = kos.networks.private_cidr %}
include:
  - bastion.forwarding

bastion-nat-pkg-installed:
  pkg.installed:
    - pkgs: {{ ['iptables', 'iptables-persistent'] | tojson }}

bastion-nat-iptables-append-masquerade:
  iptables.append:
    - table: nat
    - chain: POSTROUTING
    - source: {{ private_cidr }}
    - out-interface: {{ bastion.public_interface }}
    - jump: MASQUERADE
    - save: {{ bastion.rules_file }}
    - require:
      - pkg: bastion-nat-pkg-installed
      - sysctl: bastion-forwarding-sysctl-present-ip_forward

bastion-nat-iptables-append-forward-out:
  iptables.append:
    - table: filter
    - chain: FORWARD
    - in-interface: {{ bastion.private_interface }}
    - out-interface: {{ bastion.public_interface }}
    - source: {{ private_cidr }}
    - jump: ACCEPT
    - save: {{ bastion.rules_file }}
    - require:
      - pkg: bastion-nat-pkg-installed

bastion-nat-iptables-append-forward-back:
  iptables.append:
    - table: filter
    - chain: FORWARD
    - in-interface: {{ bastion.public_interface }}
    - out-interface: {{ bastion.private_interface }}
    - match: conntrack
    - ctstate: ESTABLISHED,RELATED
    - jump: ACCEPT
    - save: {{ bastion.rules_file }}
    - require:
      - pkg: bastion-nat-pkg-installed

bastion-nat-iptables-set_policy-forward-drop:
  iptables.set_policy:
    - table: filter
    - chain: FORWARD
    - policy: DROP
    - save: {{ bastion.rules_file }}
    - require:
      - iptables: bastion-nat-iptables-append-forward-out
      - iptables: bastion-nat-iptables-append-forward-back
