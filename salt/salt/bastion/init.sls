include:
  - bastion.forwarding
  - bastion.nat
  - bastion.fail2ban
