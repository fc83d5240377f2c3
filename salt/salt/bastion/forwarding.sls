{%- from "bastion/map.jinja" import bastion with context %}

bastion-forwarding-sysctl-present-ip_forward:
  sysctl.present:
    - name: net.ipv4.ip_forward
    - value: 1
    - config: {{ bastion.sysctl_file }}
