"""Test stand-ins for the `snap` and `microk8s` CLIs (kos project).

Ground truth for every message, exit code and file: shared/reference/cli-reference.md, PART A.
Kubernetes does not run here; only the CLI surface, the state files and the cluster-agent
join protocol (HTTPS on the node's cluster-agent address) are reproduced.

Conventions other code relies on:

* ``KOS_STANDIN_ROOT``  directory treated as ``/`` for every file touched (default ``/``).
  SNAP_DATA = $ROOT/var/snap/microk8s/current (symlink to the revision dir),
  SNAP_COMMON = $ROOT/var/snap/microk8s/common, SNAP = $ROOT/snap/microk8s/current.
* ``KOS_STANDIN_IP``    the node's only IP (default: first IPv4 of the default-route interface,
  else 127.0.0.1).  It is also the source address of outgoing cluster connections, and a
  ``--bind 0.0.0.0:PORT`` in args/cluster-agent binds to this IP instead of the wildcard, so
  several simulated nodes can share one host on 127.x.y.z addresses.
* ``KOS_STANDIN_DELAY`` simulated duration of a join, float seconds (default 0).
* Agents: process cmdline contains ``kos-standin-cluster-agent``; pidfile
  $SNAP_DATA/var/run/kos-standin-cluster-agent.pid.  Kill every agent under a root with
  ``microk8s_standin.agent.kill_all_agents(root)`` or
  ``python3 -m microk8s_standin.agent kill-all ROOT`` (PYTHONPATH=tests/standins/lib).
  An agent also exits by itself once its pidfile disappears (e.g. the root was deleted).
"""
