"""
kos glue states.
"""

import glob
import os
import shutil
from collections.abc import Mapping

from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_backup, kos_state

__virtualname__ = "kos"
# Every Kubernetes node's place in its cluster (kos.kubernetes_state), in the mine.
KUBERNETES_MINE = "kos_kubernetes"


def __virtual__():
    if "kos.validate_pillar" in __salt__:
        return __virtualname__
    return (False, "kos: the kos execution module is not available")


def pillar_valid(name):
    """
    Fail, naming every bad key, when this minion's pillar is invalid. Run it
    first with ``failhard: True`` so nothing changes on bad input.
    """
    ret = kos_state.ret(name)
    try:
        __salt__["kos.validate_pillar"]()
    except CommandExecutionError as exc:
        return kos_state.fail(ret, exc)
    ret["comment"] = "pillar is valid"
    return ret


def converged(name, hosts=None, refresh_pillar=False, by="orchestration"):
    """
    Note what this highstate was made of (``kos.record_converged``), so the next
    orchestration leaves this node alone while none of it changes: the state tree digest
    ``name`` the orchestration passed, this node's pillar and the deployment's members.
    Run last (``order: last``); notes nothing when any state of this run failed, so a
    node that did not converge is converged again next time, and nothing in test mode.

    hosts
        The hosts file's managed block this run wrote (``{"file", "start", "end"}``), or
        None: noted, ``kos.learn_members`` rewrites it when only the members change.

    by
        Who ran this converge: ``orchestration`` (kos converge, orch.deploy) or
        ``reactor`` (the master's reactor, when this minion started).

    refresh_pillar
        Once noted, ask the minion to refresh its in-memory pillar (its schedule, its mine
        functions), without waiting: the orchestration did not refresh it before this run.
    """
    ret = kos_state.ret(name)
    # Salt hands __running__ over frozen: every result is a Mapping, not a dict
    failed = sorted(tag for tag, res in __running__.items()
                    if isinstance(res, Mapping) and res.get("result") is False)
    if failed:
        ret["comment"] = f"not noted: {len(failed)} state(s) of this run failed"
        return ret
    if __opts__["test"]:
        ret["comment"] = "a run that changes something notes what it was made of"
        return ret
    try:
        __salt__["kos.record_converged"](tree=name, hosts=hosts, by=by)
    except (OSError, CommandExecutionError) as exc:
        return kos_state.fail(ret, f"cannot note this converge: {exc}")
    ret["comment"] = "noted what this converge was made of"
    # A node that joined in this run says so in the mine now, not at the next
    # mine_interval: the first control plane's init guard (kos.sole_cluster) and the
    # master's reactor read it. Not the first control plane: its entry says the cluster is
    # up, which orch.deploy sends once the whole converge is done (kos-orch-deploy-cluster-up):
    # from then on the reactor converges minions that start, and not beside that converge.
    mine = (__salt__["config.merge"]("mine_functions", {}) or {}).get(KUBERNETES_MINE)
    first = ((__pillar__.get("kos") or {}).get("first_control_plane") == __opts__["id"])
    if mine is not None and not first and any(isinstance(res, Mapping) and res.get("changes")
                                              for res in __running__.values()):
        __salt__["mine.update"](mine_functions={KUBERNETES_MINE: mine})
        ret["comment"] += f"; {KUBERNETES_MINE} sent to the mine"
    if refresh_pillar:
        __salt__["saltutil.refresh_pillar"](wait=False)
        ret["comment"] += "; its in-memory pillar is being refreshed"
    return ret


def sole_cluster(name):
    """
    Ensure initialising ``name``, the first control plane, cannot start a second cluster:
    when this node holds nothing of a cluster (``fresh`` in ``kos.kubernetes_state``: its
    server was rebuilt) while other nodes of the deployment say in the mine
    (``kos_kubernetes``) that they joined, fail, naming them and the way out, in test mode
    too. Otherwise pass: the node holds its cluster, or no other node joined (the first
    converge). Require it from the state that initialises; ``orch.deploy`` has such a
    node rejoin through a joined control plane instead (or refuses, when none is joined),
    this guards a plain ``state.highstate``.
    """
    ret = kos_state.ret(name)
    me = __salt__["kos.kubernetes_state"]()
    if not me or not me.get("first"):
        ret["comment"] = "not the first control plane: nothing to guard"
        return ret
    if me.get("fresh") is not True:
        ret["comment"] = "this node holds its cluster (or could not tell): nothing to guard"
        return ret
    nodes = sorted(set((__pillar__.get("kos") or {}).get("nodes") or {}) - {__opts__["id"]})
    said = __salt__["mine.get"](nodes, KUBERNETES_MINE, tgt_type="list") if nodes else {}
    joined = sorted(n for n, st in (said or {}).items()
                    if isinstance(st, Mapping) and st.get("joined") is True)
    if not joined:
        ret["comment"] = "no other node joined a cluster: this node may initialise one"
        return ret
    ret["result"] = False
    ret["comment"] = (
        f"the first control plane {__opts__['id']} holds no cluster, but "
        f"{', '.join(joined)} joined the cluster it initialised: initialising it would "
        "start a second cluster, so nothing changed; converge it through the orchestration "
        "(kos up, or salt-run state.orchestrate orch.deploy), which has it rejoin through a "
        "joined control plane, or bring back its server with its disk")
    return ret


def backups_kept(name, incoming, keep=7):
    """
    On the salt master: file the sealed backups control planes pushed (``cp.push`` puts
    them under ``<incoming>/<minion>/files/...``) into ``name``, then keep only the ``keep``
    newest there (their names end in their UTC time). Changes: what was filed and what
    was removed.
    """
    ret = kos_state.ret(name)
    pushed = sorted(p for p in glob.glob(os.path.join(incoming, "*", "files", "**", "*"),
                                         recursive=True)
                    if kos_backup.is_sealed(p) and os.path.isfile(p))
    filed = [os.path.basename(p) for p in pushed]
    have = kos_backup.oldest_first(
        {*filed, *(os.listdir(name) if os.path.isdir(name) else [])})
    removed = have[:-int(keep)] if int(keep) > 0 and len(have) > int(keep) else []
    if filed or removed:
        ret["changes"] = {"filed": filed, "removed": removed}
    if __opts__["test"]:
        ret["result"] = None if ret["changes"] else True
        ret["comment"] = (f"would file {len(filed)} backup(s) and remove {len(removed)}"
                          if ret["changes"] else f"{len(have)} backup(s) kept, nothing to do")
        return ret
    os.makedirs(name, mode=0o700, exist_ok=True)
    for path in pushed:
        shutil.move(path, os.path.join(name, os.path.basename(path)))
        os.chmod(os.path.join(name, os.path.basename(path)), 0o600)
    for f in removed:
        os.unlink(os.path.join(name, f))
    ret["comment"] = f"{len(have) - len(removed)} backup(s) kept in {name}"
    return ret
