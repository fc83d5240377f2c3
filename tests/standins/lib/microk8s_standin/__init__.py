"""Test stand-ins for the `snap` and `microk8s` CLIs (kos project).

Every message, exit code and file follows the snap's own scripts
(https://github.com/canonical/microk8s: microk8s-resources/wrappers, scripts/wrappers), snapd's
`snap` client (https://github.com/canonical/snapd/tree/master/cmd/snap) and, for
cordon/uncordon/drain, kubectl (https://github.com/kubernetes/kubectl/tree/v0.31.0/pkg/drain).
Kubernetes does not run here; only the CLI surface, the state files, the cluster-agent
join protocol (HTTPS on the node's cluster-agent address) and, on control planes, the API
server's unauthenticated endpoints (/livez, /readyz, /healthz, /version on --secure-port,
with the node's server certificate) are reproduced.

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

Day-2 behaviour (rolling upgrades):

* ``snap refresh --hold[=DURATION] [microk8s]`` / ``snap refresh --unhold [microk8s]``
  (https://snapcraft.io/docs/managing-updates):
  a per-snap hold is stored in the install record ($ROOT/var/lib/snapd/kos-standin/microk8s.json)
  as ``"hold": "forever"`` or an RFC 3339 expiry in the local zone; while it has not expired,
  ``snap list`` shows ``classic,held`` in Notes.  Without snap names the system-wide auto-refresh
  hold goes to ``"refresh.hold"`` in $ROOT/var/lib/snapd/kos-standin/system.json.  DURATION is
  parsed like Go's time.ParseDuration; --hold takes a value only as ``--hold=V``; with any other
  refresh flag (--channel included) it is refused.  An explicit ``snap refresh microk8s
  --channel=...`` still refreshes a held snap and keeps the hold.
* ``microk8s kubectl cordon|uncordon|drain NODE...``: sets/clears ``unschedulable`` on the
  node entry through the replicated datastore (``unschedulable_since`` is the taint's timeAdded).
  ``get nodes`` shows ``Ready,SchedulingDisabled``; ``-o json`` a ``spec`` with
  ``unschedulable: true`` and the ``node.kubernetes.io/unschedulable:NoSchedule`` taint.  The
  datastore has no Pods, so drain evicts nothing: ``node/N cordoned`` then ``node/N drained``.
  Flags: --ignore-daemonsets, --delete-emptydir-data, --force, --disable-eviction, --timeout
  (Go duration), --grace-period and the other int flags (checked, no effect), --dry-run=client|
  server|none; -l/--selector is not supported.
* ``snap refresh`` to another revision leaves a "report pending" mark
  ($SNAP_DATA/var/kos-standin/node-report-pending); when the services run (right away, or at the
  next ``snap start|restart`` / ``microk8s start``) the node reports Ready and its new version
  (kubeletVersion/kubeProxyVersion, VERSION) like a restarted kubelet: a control-plane node in
  its datastore copy (replicated), a worker by POSTing ``/kos-standin/v1/node-status`` to the
  control-plane agents it learnt at join ($SNAP_DATA/var/kos-standin/control-plane-agents.json).
  Only ready/version change, so a cordoned node stays cordoned through the refresh.  The
  refresh itself is instantaneous: no NotReady window is visible.
"""
