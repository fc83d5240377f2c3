# Defaults for every host named "bastion": the SSH entry point is a target.
bastion:
  fail2ban:
    maxretry: 4
