"""
kos glue states.
"""

import glob
import os
import shutil
from collections.abc import Mapping

from salt.exceptions import CommandExecutionError

__virtualname__ = "kos"


def __virtual__():
    if "kos.validate_pillar" in __salt__:
        return __virtualname__
    return (False, "kos: the kos execution module is not available")


def pillar_valid(name):
    """
    Fail, naming every bad key, when this minion's pillar is invalid. Run it
    first with ``failhard: True`` so nothing changes on bad input.
    """
    ret = {"name": name, "result": True, "changes": {}, "comment": "pillar is valid"}
    try:
        __salt__["kos.validate_pillar"]()
    except CommandExecutionError as exc:
        ret["result"] = False
        ret["comment"] = str(exc)
    return ret


def converged(name, hosts=None, refresh_pillar=False):
    """
    Note what this highstate was made of (``kos.record_converged``), so the next
    orchestration leaves this node alone while none of it changes: the state tree digest
    ``name`` the orchestration passed, this node's pillar and the deployment's members.
    Run last (``order: last``); notes nothing when any state of this run failed, so a
    node that did not converge is converged again next time, and nothing in test mode.

    hosts
        The hosts file's managed block this run wrote (``{"file", "start", "end"}``), or
        None: noted, ``kos.learn_members`` rewrites it when only the members change.

    refresh_pillar
        Once noted, ask the minion to refresh its in-memory pillar (its schedule, its mine
        functions), without waiting: the orchestration did not refresh it before this run.
    """
    ret = {"name": name, "result": True, "changes": {}, "comment": ""}
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
        __salt__["kos.record_converged"](tree=name, hosts=hosts)
    except (OSError, CommandExecutionError) as exc:
        ret["result"] = False
        ret["comment"] = f"cannot note this converge: {exc}"
        return ret
    ret["comment"] = "noted what this converge was made of"
    if refresh_pillar:
        __salt__["saltutil.refresh_pillar"](wait=False)
        ret["comment"] += "; its in-memory pillar is being refreshed"
    return ret


def backups_kept(name, incoming, keep=7):
    """
    On the salt master: file the sealed backups control planes pushed (``cp.push`` puts
    them under ``<incoming>/<minion>/files/...``) into ``name``, then keep only the ``keep``
    newest there (their names end in their UTC time). Changes: what was filed and what
    was removed.
    """
    ret = {"name": name, "result": True, "changes": {}, "comment": ""}
    pushed = sorted(p for p in glob.glob(os.path.join(incoming, "*", "files", "**", "*"),
                                         recursive=True)
                    if __utils__["kos_backup.is_sealed"](p) and os.path.isfile(p))
    filed = [os.path.basename(p) for p in pushed]
    have = __utils__["kos_backup.oldest_first"](
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
