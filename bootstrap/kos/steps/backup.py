"""``kos backup`` and ``kos restore``: the datastore backed up to the salt master
(orch.backup) and put back from a backup it keeps (orch.restore)."""

from .. import ui
from ..errors import ConvergeError, InputError
from .deployment import pillar_of, salt_master_id
from .master import STATUS_PING, orchestrated, push_states


def _master_id(outputs):
    master_id = salt_master_id(pillar_of(outputs))
    if not master_id:
        raise ConvergeError("the outputs name no salt master minion (kos:salt_master:id)",
                            fix="run kos up to converge the cluster first")
    return master_id


def _kept_backups(master, master_id):
    kept = master.salt([master_id], "kos.backups", timeout=STATUS_PING).get(master_id)
    if not isinstance(kept, list):
        raise ConvergeError(f"the salt master's minion {master_id} did not list its backups",
                            fix="check that the salt master answers (kos status), then re-run",
                            details=[str(kept)[:300]])
    return kept


def backup(dep, list_only=False):
    """orch.backup: the datastore backed up to the salt master (unless ``list_only``);
    returns the backups the master keeps, oldest first."""
    outputs = dep.require_outputs()
    master_id = _master_id(outputs)
    summary = None
    with dep.master() as master:
        if not list_only:
            push_states(master, dep.settings)
            with ui.step("back up the cluster's datastore to the salt master"):
                summary = master.orchestrate("orch.backup", {}, rerun="kos backup")
        kept = _kept_backups(master, master_id)
    done = {"backups": kept}
    if summary is not None:
        done = {"orchestration": orchestrated(summary), "backup": kept[-1]["name"] if kept
                else None, **done}
    return done


def restore(dep, confirm, name=None):
    """orch.restore: the datastore put back as backup ``name`` (default: the newest the
    master keeps) left it, on every control plane."""
    outputs = dep.require_outputs()
    master_id = _master_id(outputs)
    with dep.master() as master:
        kept = [b["name"] for b in _kept_backups(master, master_id)]
        if name and name not in kept:
            raise InputError(f"--backup: the salt master keeps no backup {name}",
                             fix="name one it keeps (kos backup --list): "
                             + (", ".join(kept) or "none; take one with kos backup"))
        if not kept:
            raise InputError("the salt master keeps no backup to restore",
                             fix="take one first: kos backup")
        chosen = name or kept[-1]
        # every object made or changed since goes back to the backup's; the API is down a while
        confirm(f"restore {dep.cluster} from {chosen}, putting every Kubernetes object back as "
                "the backup has it")
        push_states(master, dep.settings)
        with ui.step(f"restore the datastore from {chosen} on every control plane"):
            summary = master.orchestrate("orch.restore", {"backup": chosen},
                                         rerun=f"kos restore --backup {chosen}")
    return {"orchestration": orchestrated(summary), "restored": chosen}

