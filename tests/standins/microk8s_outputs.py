"""What the real `microk8s status --format yaml` prints (print_yaml in
https://github.com/canonical/microk8s/blob/master/scripts/wrappers/status.py), held once for
the stand-in's tests and the execution module's unit tests."""

# A fresh single node, up to its first addon.
FRESH_YAML_START = """\
microk8s:
  running: True
high-availability:
  enabled: True
  nodes:
    - address: 127.0.0.1:19001
      role: voter
addons:
  - name: dns
    repository: core
    description: CoreDNS
    version: 1.10.1
    status: enabled
"""

NOT_RUNNING_YAML = """\
microk8s:
  running: False
high-availability:
  enabled: True
  nodes:
    - address: 127.0.0.1:19001
      role: voter
  message: microk8s is not running. Use microk8s inspect for a deeper inspection.
"""
