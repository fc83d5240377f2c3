"""
The master's answer to a minion that starts (``salt/minion/<id>/start``, through
salt://reactor/start.sls): a Kubernetes node this deployment expects, that has not joined
its cluster, starting once that cluster is up, is converged by ``orch.deploy`` (pillar
``started: <id>``): its highstate after the credentials it needs, /etc/hosts on the others.
Anything else is logged and does nothing. Keys are never accepted here: a start event
comes only from a minion whose key kos accepted.

An orchestration someone started (``state.orchestrate``: kos converge, an operator's
upgrade) runs first: the reaction waits until it ends, then decides, so a node never
joins in the middle of an upgrade and a converge that already took the node in leaves
nothing to do. Reactions do not wait for one another (two nodes that start together join
together), and kos waits for the reactor's before it starts its own.

Decided from the master's own caches (each minion's cached pillar and mine), read
directly: a master that restarts sees every minion start again (each minion initialises
its connection anew and fires its start event), so at 53 minions the decision runs 53
times at once. Through the ``cache.pillar`` and ``mine.get`` runners each decision
loaded a runner client of its own and took seconds of the master's CPU while it had to
answer the minions reconnecting; and every joined node started an orchestration that
asked every minion what it needs, to find nothing.
"""

import logging
import time

import salt.cache
import salt.utils.master
import salt.utils.mine

log = logging.getLogger(__name__)

__virtualname__ = "kos_reactor"

# kos.kubernetes_state, in every Kubernetes node's mine (pillar kos/derived.sls)
KUBERNETES_MINE = "kos_kubernetes"
# What kos and operators start; the reactor's own jobs are runner.kos_reactor.started.
ORCHESTRATE = "runner.state.orchestrate"


def __virtual__():
    return __virtualname__


def _cached(cache, bank, minion):
    try:
        data = cache.fetch(bank, minion)
    except Exception as exc:  # noqa: BLE001 - a cache that cannot be read decides nothing
        log.warning("kos reactor: cannot read the master's %s cache of %s: %s", bank, minion,
                    exc)
        return {}
    return data if isinstance(data, dict) else {}


def _kubernetes(cache, minion):
    """What ``minion`` last said in the mine about its place in its cluster ({} unknown)."""
    entry = _cached(cache, "mine", minion).get(KUBERNETES_MINE)
    if isinstance(entry, dict) and salt.utils.mine.MINE_ITEM_ACL_ID in entry:
        entry = entry.get(salt.utils.mine.MINE_ITEM_ACL_DATA)
    return entry if isinstance(entry, dict) else {}


def decide(minion):
    """
    What the reactor does for ``minion`` that started: ``{"minion", "converge": bool,
    "why"}``, from the master's caches only, logged (a warning for a minion nobody
    expects).

    CLI Example:

    .. code-block:: bash

        salt-run kos_reactor.decide k8s-worker-3.example.com
    """
    cache = salt.cache.factory(__opts__)
    kos = _cached(cache, "pillar", minion).get("kos") or {}
    first = kos.get("first_control_plane")
    hint = ""
    if not kos.get("roles"):
        why = "started, but no deployment expects it (no kos:roles in its pillar)"
    elif minion not in (kos.get("nodes") or {}):
        why = "started, but it is no Kubernetes node"
        hint = " (kos converge converges it)"
    elif _kubernetes(cache, first).get("initialised") is not True:
        why = "started before its cluster is up"
        hint = " (the first converge is kos converge's)"
    elif minion == first:
        why = "started, but it is the first control plane and its cluster is up"
    elif _kubernetes(cache, minion).get("joined") is True:
        # a joined node that restarted, or any node once the master restarted
        why = "started, but it joined its cluster already (its mine says so)"
    else:
        log.info("kos reactor: minion %s started and has not joined its cluster: converging it",
                 minion)
        return {"minion": minion, "converge": True, "why": "it has not joined its cluster"}
    level = logging.WARNING if "no deployment" in why else logging.INFO
    log.log(level, "kos reactor: minion %s %s: nothing done%s", minion, why, hint)
    return {"minion": minion, "converge": False, "why": why}


def _orchestrations():
    """The jids of the ``state.orchestrate`` jobs running on this master."""
    return sorted(str(job.get("jid")) for job in salt.utils.master.get_running_jobs(__opts__)
                  if job.get("fun") == ORCHESTRATE)


def _wait_for_orchestrations(minion, wait, poll):
    """Wait until no ``state.orchestrate`` runs, at most ``wait`` s; False when one still
    does."""
    deadline = time.monotonic() + wait
    said = None
    while True:
        running = _orchestrations()
        if not running:
            return True
        if time.monotonic() >= deadline:
            log.warning("kos reactor: minion %s started while orchestration %s ran, still "
                        "running after %s s: nothing done (kos converge converges it)",
                        minion, ", ".join(running), wait)
            return False
        if running != said:
            log.info("kos reactor: minion %s started while orchestration %s runs: waiting "
                     "for it to end", minion, ", ".join(running))
            said = running
        time.sleep(poll)


def started(minion, wait=3600, poll=5):
    """
    The reaction to ``salt/minion/<minion>/start``: once no ``state.orchestrate`` runs on
    this master (at most ``wait`` s), ``decide``, then ``orch.deploy`` with pillar
    ``started: <minion>`` when it says so (the orchestration checks again, from the
    minions' own answers). Returns the decision, with the orchestration's return under
    ``orchestration`` when one ran.

    CLI Example:

    .. code-block:: bash

        salt-run kos_reactor.started k8s-worker-3.example.com
    """
    if not _wait_for_orchestrations(minion, wait, poll):
        return {"minion": minion, "converge": False,
                "why": f"an orchestration still ran after {wait} s"}
    ret = decide(minion)
    if ret["converge"]:
        ret["orchestration"] = __salt__["state.orchestrate"]("orch.deploy",
                                                             pillar={"started": minion})
    return ret
