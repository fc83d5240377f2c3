"""
The cloud-controller-manager's application credential as steps (``kos.ccm`` holds what a
credential is and how Keystone makes one): placed in every control plane's pillar layer
before the orchestration, the credentials no control plane uses deleted after it, and
``kos rotate-ccm-credential``.
"""

from pathlib import Path

from .. import ccm, ui
from ..errors import ConvergeError, InputError
from ..salt import failed_states


def _ccm_layers(master, dep, outputs):
    """The control planes' credential layers: ``({hostname: path}, {path: credential id}
    of every ``_ccm_*.sls`` on the master)``."""
    pillar_dir = str(Path(dep.settings.pillar_file).parent)
    paths = {h: f"{pillar_dir}/{ccm.layer_name(h)}" for h in ccm.control_planes(outputs)}
    return paths, master.layer_values(pillar_dir, "_ccm_*.sls", "application_credential_id")


def ccm_credential(master, dep, outputs, rotate=False):
    """
    The cloud-controller-manager's application credential in every control plane's
    pillar layer (``kos.ccm``): a new one when a control plane lacks it, the layers name a
    credential Keystone no longer has, or on ``rotate``. Layers of hosts that are no
    control plane any more go. The credential replaced stays valid until
    ``retire_ccm_credentials``, after the control planes have the new one.
    """
    conn = dep.project()
    if conn is None or not ccm.wanted(outputs):
        return {"skipped": "no OpenStack project, or no cloud-controller-manager (kubeadm)"}
    paths, named = _ccm_layers(master, dep, outputs)
    stale = sorted(set(named) - set(paths.values()))
    in_use = {named.get(p) for p in paths.values()}
    if not rotate and len(in_use) == 1 and in_use <= set(ccm.existing(conn, dep.cluster)):
        master.remove_files(stale)
        return {"kept": in_use.pop(), "control_planes": sorted(paths), "removed": stale}
    cred = ccm.create(conn, dep.cluster)
    text = ccm.layer(cred)
    for path in paths.values():
        master.push_pillar(text, path, mode=ccm.LAYER_MODE)
    master.remove_files(stale)
    return {"created": cred["id"], "control_planes": sorted(paths), "removed": stale}


def retire_ccm_credentials(master, dep, outputs):
    """Delete the cluster's CCM credentials but the one every control plane's layer names
    (none is deleted while the layers disagree: a re-run settles it)."""
    conn = dep.project()
    if conn is None or not ccm.wanted(outputs):
        return {"skipped": "no OpenStack project, or no cloud-controller-manager (kubeadm)"}
    paths, named = _ccm_layers(master, dep, outputs)
    in_use = {named.get(p) for p in paths.values()}
    if len(in_use) != 1 or None in in_use:
        return {"kept": sorted(i for i in in_use if i), "deleted": []}
    keep = in_use.pop()
    return {"kept": [keep], "deleted": ccm.delete(conn, dep.cluster, keep=keep)}


def rotate_ccm_credential(dep):
    """A new CCM credential on the control planes (their cloud.conf rewritten, the cloud
    controller restarted by its manifest's digest), then the old one deleted."""
    outputs = dep.require_outputs()
    if not ccm.wanted(outputs):
        raise InputError("only a kubeadm cluster runs the OpenStack cloud-controller-manager",
                         fix="nothing to rotate for this cluster")
    hosts = set(ccm.control_planes(outputs))
    targets = sorted(m for m, i in outputs["minions"].items() if i.get("hostname") in hosts)
    with dep.master() as master:
        with ui.step("create the new cloud-controller-manager credential"):
            created = ccm_credential(master, dep, outputs, rotate=True)
        if "created" not in created:
            raise ConvergeError(f"no credential was created: {created.get('skipped')}")
        with ui.step(f"apply kubeadm.ccm on {len(targets)} control planes"):
            master.salt(targets, "saltutil.refresh_pillar", "wait=True", timeout=120)
            ret = master.salt(targets, "state.apply", "kubeadm.ccm", timeout=600)
            bad = {m: failed_states(ret.get(m)) for m in targets}
            bad = {m: f for m, f in bad.items() if f or m not in ret}
            if bad:
                raise ConvergeError(
                    "kubeadm.ccm failed on " + ", ".join(sorted(bad))
                    + "; the old credential stays valid",
                    fix="fix the failing control planes, then re-run kos rotate-ccm-credential",
                )
        with ui.step("delete the old credential"):
            retired = retire_ccm_credentials(master, dep, outputs)
    return {"credential": created["created"], "deleted": retired.get("deleted", [])}

