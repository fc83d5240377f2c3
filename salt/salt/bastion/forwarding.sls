bastion-forwarding-sysctl-present-ip_forward:
  sysctl.present:
    - name: net.ipv4.ip_forward
    - value: 1
    - config: /etc/sysctl.d/90-kos-bastion.conf
