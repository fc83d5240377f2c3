{#- The private network reaches out through the bastion; nothing comes in but replies. #}
{%- from "bastion/map.jinja" import bastion with context %}
{%- from "kos/map.jinja" import kos with context %}
{%- set private_cidr = kos.networks.private_cidr %}
include:
  - bastion.packages
  - bastion.forwarding

bastion-nat-iptables-append-masquerade:
  iptables.append:
    - table: nat
    - chain: POSTROUTING
    - source: {{ private_cidr }}
    - out-interface: {{ bastion.public_interface }}
    - jump: MASQUERADE
    - save: {{ bastion.rules_file }}
    - require:
      - sls: bastion.packages
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
      - sls: bastion.packages

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
      - sls: bastion.packages

bastion-nat-iptables-set_policy-forward-drop:
  iptables.set_policy:
    - table: filter
    - chain: FORWARD
    - policy: DROP
    - save: {{ bastion.rules_file }}
    - require:
      - iptables: bastion-nat-iptables-append-forward-out
      - iptables: bastion-nat-iptables-append-forward-back
