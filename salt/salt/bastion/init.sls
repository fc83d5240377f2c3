include:
  - bastion.packages
  - bastion.forwarding
  - bastion.nat
  - bastion.fail2ban
