"""
The steps behind the commands. Each is idempotent and recorded in the cluster's state
directory; the CLI only parses options and calls these.
"""

import enum
import hashlib
import json
import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import ccm, distributions, trust, ui
from . import inputs as inputs_mod
from .backends import for_cloud, missing_outputs
from .cloud import raise_on_failures
from .errors import ConvergeError, InputError
from .salt import PILLAR_FILE, SaltMaster, failed_states
from .ssh import Ssh
from .state import StateDir, fingerprint, holder

# The formula and pillar kos pushes to the master: this checkout's.
REPO = Path(__file__).resolve().parents[2]
# Seconds a minion already in the cluster gets to answer before a converge stops.
ANSWER_GRACE = 30
# Seconds kos status waits for answers.
STATUS_PING = 10


@dataclass
class Settings:
    terraform_dir: Path
    state_root: Path
    var_files: list = field(default_factory=list)
    cloud: str = "openstack"
    os_cloud: str = None
    outputs_file: Path = None
    ssh_port: int = 22
    wait_minions: int = 900
    # How long SSH keeps trying a bastion or master that is still booting.
    connect_wait: int = 0
    pillar_file: str = PILLAR_FILE
    state_tree: str = "/srv/salt"
    formula_dir: Path = REPO / "salt" / "salt"
    pillar_dir: Path = REPO / "pillar"
    # Hostnames whose servers `kos up` rebuilds (terraform apply -replace).
    replace: tuple = ()
    # The environment (environments/<env>/) whose variables and state these are.
    env: str = None
    # Pinned host keys; they replace the state directory's known_hosts before SSH.
    known_hosts: Path = None
    # Accept minion keys and SSH host keys no console vouched for (trust on first use).
    trust_unverified: bool = False


class Deployment:
    """One cluster: its inputs, state directory and backend."""

    def __init__(self, settings, need_inputs=True):
        self.settings = settings
        self.inputs = None
        self._outputs = None
        if settings.outputs_file:
            self._outputs = load_outputs(settings.outputs_file)
            cluster = self._outputs["cluster_name"]
        if need_inputs or not settings.outputs_file:
            with ui.step("evaluate the deployment's Terraform variables"):
                self.inputs = inputs_mod.evaluate(settings.terraform_dir, settings.var_files)
            cluster = self.inputs.cluster_name
        self.state = StateDir(settings.state_root, cluster)
        self.steps = self.state.steps()
        self.backend = for_cloud(settings, self.state)
        # Who holds the cluster's lock, while this run changes it (see ``locked``).
        self.holder = None
        # The consoles were read afresh in this run (once is enough: see console_records).
        self.consoles_read = False

    @property
    def cluster(self):
        return self.state.cluster

    def use_outputs(self, outputs):
        self._outputs = outputs

    def outputs(self):
        if self._outputs is None:
            self._outputs = self.backend.outputs()
        return self._outputs

    def require_outputs(self):
        outputs = self.outputs()
        if not outputs:
            raise ConvergeError(
                f"cluster {self.cluster} has no infrastructure yet (no Terraform outputs)",
                fix="run kos up first",
            )
        missing = missing_outputs(outputs)
        if missing:
            raise ConvergeError(
                f"the infrastructure's outputs lack {', '.join(missing)}",
                fix="re-run terraform apply (kos up) with this repository's terraform/",
            )
        return outputs

    @contextmanager
    def master(self):
        outputs = self.require_outputs()
        self.state.ensure()
        accept_new = pin_host_keys(self, outputs)
        ssh = Ssh(
            self.state.path,
            outputs["bastion_floating_ip"],
            outputs["salt_master_private_ip"],
            outputs["ssh_user"],
            port=self.settings.ssh_port,
            connect_wait=self.settings.connect_wait,
            accept_new=accept_new,
            nodes_accept_new=self.settings.trust_unverified,
        )
        master = SaltMaster(ssh)
        try:
            if self.holder:
                # The run that holds the local lock holds the master's for as long as it talks
                # to the master: another machine's kos cannot run beside it.
                master.lock(self.cluster, self.holder)
            yield master
        finally:
            try:
                master.close()
            finally:
                ssh.close()


# (role in the outputs' minions, what to call it, the output holding its SSH address)
SSH_HOSTS = (
    ("bastion", "bastion", "bastion_floating_ip"),
    ("salt_master", "salt master", "salt_master_private_ip"),
)


def _console_reader(dep, name):
    """The backend's reader of consoles ``name``, or None where no cloud can be read
    (``--outputs`` runs, a cloud without consoles)."""
    if dep.settings.outputs_file:
        return None
    return getattr(dep.backend, name, None)


def console_records(dep, needed=()):
    """
    What the servers' consoles printed (``kos.trust`` records by minion id), as recorded
    at first boot; read afresh from the cloud when one of ``needed`` has no record and the
    backend can read consoles (not for ``--outputs`` runs, which have no cloud).
    """
    store = trust.Consoles(dep.state.path)
    records = store.load()
    if not [m for m in needed if not trust.has_marks(records.get(m))]:
        return records
    reader = _console_reader(dep, "read_consoles")
    if reader is None or dep.consoles_read:
        return records
    dep.consoles_read = True
    try:
        fresh = reader()
    except Exception as exc:  # noqa: BLE001 - the decisions that follow name what is missing
        ui.warn(f"could not read the servers' consoles: {exc}")
        return records
    return store.update(fresh)


def syndic_masters(dep, clusters):
    """
    The salt masters of the environments that join this top master as syndics:
    ``{cluster: (minion id, console record) or None}``, from the cloud's consoles; None for
    all where no cloud can be read.
    """
    reader = _console_reader(dep, "read_master_consoles")
    return reader(clusters) if reader else dict.fromkeys(clusters)


def accept_syndics(dep, master, clusters):
    """A top master's step: accept the syndics of ``clusters`` whose masters are up."""
    result = master.accept_syndics(
        syndic_masters(dep, clusters), trust_unverified=dep.settings.trust_unverified
    )
    for cluster in result["waiting"]:
        ui.info(
            f"syndic {cluster}: not joined yet (its master is not up, or its salt-syndic has "
            f"not presented its key): run kos converge here again once {cluster} is up"
        )
    return result


def pin_host_keys(dep, outputs):
    """
    Before the first SSH connection: the bastion's and the master's host keys into the
    state directory's known_hosts, from ``--known-hosts`` or else from their consoles.
    ``True`` when one is still unknown and the operator accepts it on first use.
    """
    known = dep.state.path / "known_hosts"
    if dep.settings.known_hosts:
        shutil.copyfile(dep.settings.known_hosts, known)
        return False
    by_role = {info.get("role"): mid for mid, info in outputs["minions"].items()}
    hosts = [
        (name, by_role.get(role), trust.known_hosts_host(outputs[address], dep.settings.ssh_port))
        for role, name, address in SSH_HOSTS
    ]
    records = console_records(
        dep, [mid for _, mid, host in hosts if mid and not trust.pinned(known, host)]
    )
    unknown = []
    for name, mid, host in hosts:
        keys = (records.get(mid) or {}).get("ssh_host_keys")
        if keys:
            trust.pin(known, host, keys)
        elif not trust.pinned(known, host):
            unknown.append(f"the {name} ({host})")
    if not unknown:
        return False
    if not dep.settings.trust_unverified:
        raise ConvergeError(
            f"no verified SSH host key for {' and '.join(unknown)}: no console showed one "
            f"and none is pinned in {known}",
            fix="run kos up with the cloud's credentials so kos reads the keys from the "
            "servers' consoles (the console-log API), or pass --known-hosts FILE with the keys "
            "the consoles show, or accept them on first use with " + trust.UNVERIFIED_FLAG,
        )
    ui.warn(
        f"trusting the SSH host key of {' and '.join(unknown)} on first use "
        f"({trust.UNVERIFIED_FLAG})"
    )
    return True


def pin_node_host_key(dep, minion, address):
    """
    A node kos reaches over SSH through the bastion (``kos kubeconfig``): its host keys
    from its console into known_hosts, pinned as the bastion's and the master's are.
    """
    if dep.settings.known_hosts:
        return
    known = dep.state.path / "known_hosts"
    host = trust.known_hosts_host(address, dep.settings.ssh_port)
    keys = (console_records(dep, [minion]).get(minion) or {}).get("ssh_host_keys")
    if keys:
        trust.pin(known, host, keys)
    elif not (trust.pinned(known, host) or dep.settings.trust_unverified):
        raise ConvergeError(
            f"no verified SSH host key for {minion} ({host}): no console showed one and none "
            f"is pinned in {known}",
            fix="run kos with the cloud's credentials so kos reads the keys from the servers' "
            "consoles, or pass --known-hosts FILE with its key, or accept it on first use with "
            + trust.UNVERIFIED_FLAG,
        )


@contextmanager
def locked(dep):
    """
    The block is the only kos run changing ``dep``'s cluster: its lock in the state
    directory now, and on the salt master whenever the run connects to it.
    """
    who = holder()
    with dep.state.locked(who):
        dep.holder = who
        # What an earlier run recorded before this one held the lock.
        dep.steps = dep.state.steps()
        try:
            yield
        finally:
            dep.holder = None


def load_outputs(path):
    """A saved ``terraform output -json`` document (or a plain name -> value map)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise InputError(
            f"cannot read outputs file {path}: {exc}",
            fix="save it with `terraform output -json > outputs.json`",
        ) from exc
    if all(isinstance(v, dict) and "value" in v for v in doc.values()):
        doc = {k: v["value"] for k, v in doc.items()}
    missing = missing_outputs(doc)
    if missing:
        raise InputError(
            f"outputs file {path} lacks {', '.join(missing)}",
            fix="save the outputs of this repository's terraform/ root module",
        )
    return doc


def pillar_of(outputs):
    return yaml.safe_load(outputs["salt_pillar"]) or {}


def first_control_plane(outputs):
    first = pillar_of(outputs).get("kos", {}).get("first_control_plane")
    if first:
        return first
    cps = sorted(
        k for k, v in outputs["kubernetes_nodes"].items() if v.get("role") == "control_plane"
    )
    if not cps:
        raise ConvergeError("the outputs list no control-plane node")
    return cps[0]


# -- up / converge ---------------------------------------------------------------------


def preflight(dep, check_quota=True, report=None):
    findings = dep.backend.preflight(dep.inputs, check_quota=check_quota)
    if report:
        report(findings)
    raise_on_failures(findings)
    return {"checks": len(findings)}


def push_trees(master, settings):
    """This checkout's formula and pillar to the master."""
    return {
        "states": master.push_tree(settings.formula_dir, settings.state_tree),
        # Layers a cloud writes (_from_terraform.sls, _cloud.sls) stay.
        "pillar": master.push_tree(
            settings.pillar_dir, str(Path(settings.pillar_file).parent), keep="_*.sls"
        ),
    }


def push_pillar_layers(master, dep, outputs):
    """The Terraform layer, and whatever layers the cloud writes (``_*.sls``)."""
    pillar_dir = Path(dep.settings.pillar_file).parent
    done = {"pillar": master.push_pillar(outputs["salt_pillar"], dep.settings.pillar_file)}
    for name, text in dep.backend.pillar_layers(outputs).items():
        done[name] = master.push_pillar(text, str(pillar_dir / name))
    return done


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
    conn = None if dep.settings.outputs_file else dep.backend.project()
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
    conn = None if dep.settings.outputs_file else dep.backend.project()
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


def renew_certificates(dep, force=False):
    """orch.certificates: the control planes' certificates renewed one node at a time where
    they expire within kos:certificates:warn_days (all of them with ``force``); returns
    what each control plane has left afterwards."""
    outputs = dep.require_outputs()
    control_planes = control_plane_ids(outputs)
    pillar = {"force": True} if force else {}
    with dep.master() as master:
        # this checkout's formula (orch.certificates, the states); the pillar stays what
        # the last converge pushed
        master.push_tree(dep.settings.formula_dir, dep.settings.state_tree)
        with ui.step("renew the control planes' certificates, one at a time"):
            summary = master.orchestrate(
                "orch.certificates", pillar, rerun="kos renew-certificates"
                + (" --force" if force else ""))
        left = master.salt(control_planes, "kos.certificates", timeout=STATUS_PING)
    return {
        "orchestration": orchestrated(summary),
        "certificates": {m: certificate_summary(v) for m, v in sorted(left.items())
                         if isinstance(v, dict)},
    }


def salt_master_id(pillar):
    """The salt master's own minion id, as Terraform names it (None: no master)."""
    return ((pillar.get("kos") or {}).get("salt_master") or {}).get("id")


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
            master.push_tree(dep.settings.formula_dir, dep.settings.state_tree)
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
        master.push_tree(dep.settings.formula_dir, dep.settings.state_tree)
        with ui.step(f"restore the datastore from {chosen} on every control plane"):
            summary = master.orchestrate("orch.restore", {"backup": chosen},
                                         rerun=f"kos restore --backup {chosen}")
    return {"orchestration": orchestrated(summary), "restored": chosen}


def upgrade(dep, version=None):
    """orch.upgrade: every node moved to ``version`` (default: the pillar's), one at a
    time, each drained before and uncordoned after; returns each node's version after."""
    outputs = dep.require_outputs()
    first = first_control_plane(outputs)
    pillar = {"version": version} if version else {}
    rerun = "kos upgrade" + (f" --version {version}" if version else "")
    with dep.master() as master:
        # this checkout's formula and pillar: the target may be the pillar's new channel
        push_trees(master, dep.settings)
        with ui.step("upgrade the nodes, one at a time"):
            summary = master.orchestrate("orch.upgrade", pillar, rerun=rerun)
        _, members, problem = _kubernetes_members(master, first)
    done = [s["id"][len("kos-orch-upgrade-"):-len("-done")] for s in summary.get("steps", [])
            if s["id"].startswith("kos-orch-upgrade-") and s["id"].endswith("-done")]
    return {
        "orchestration": orchestrated(summary),
        # in the order they were moved
        "upgraded": done,
        "versions": {name: node.get("version") for name, node in sorted(members.items())},
        **({"problem": problem} if problem else {}),
    }


def remove_nodes(dep, minions, replace=False):
    """orch.remove: the nodes Terraform is about to destroy leave the cluster first (drained,
    left, forgotten by the first control plane), one at a time, workers first. A node that
    does not answer cannot leave by itself; its server goes next anyway, so the cluster
    forgets it without (orch.remove's force; a kubeadm control plane's etcd member is
    removed from the first control plane). ``replace``: the nodes come back on new servers
    (kos up --replace), which is an action: it runs whenever asked."""
    names = ", ".join(m.split(".")[0] for m in minions)
    extra = {"replace": True} if replace else {}

    def run():
        with dep.master() as master:
            # this checkout's formula: orch.remove and the states it runs
            push_trees(master, dep.settings)
            answering, silent = master.answering(minions, timeout=30)
            done = {}
            for ids, force in ((answering, False), (silent, True)):
                if not ids:
                    continue
                if force:
                    ui.warn(f"{', '.join(ids)} do not answer: forgotten by the cluster "
                            "without leaving it themselves (their servers go next)")
                pillar = {"remove": sorted(ids), **extra, **({"force": True} if force else {})}
                summary = master.orchestrate("orch.remove", pillar, rerun="kos up")
                done[("forced" if force else "left")] = orchestrated(summary)
            return done

    return dep.steps.run(
        "replace-leave" if replace else "remove-nodes", fingerprint(sorted(minions)),
        f"take {names} out of the cluster before their servers go "
        f"(salt-run state.orchestrate orch.remove "
        f"pillar='{json.dumps({'remove': sorted(minions), **extra})}')",
        run, always=replace,
    )


def _last_apply(dep):
    """What the last apply recorded in its step: the hosts it ``replaced``, the minion ids
    it ``retired``."""
    return dep.steps.get(dep.backend.create_step).get("detail") or {}


def rebuilt_minions(dep):
    """The minion ids whose servers the last apply rebuilt (--replace) and whose new
    servers present new keys; the master's keys sit on its state volume and stay."""
    hosts = set(_last_apply(dep).get("replaced") or ()) - {"salt"}
    minions = (dep.outputs() or {}).get("minions") or {}
    return sorted(mid for mid, m in minions.items() if m.get("hostname") in hosts)


def refuse_replacing_the_only_control_plane(dep):
    """A rebuilt first control plane rejoins through another joined control plane
    (orch.deploy); with none, its new server would hold nothing to rejoin and the cluster
    would be gone."""
    outputs = dep.outputs() or {}
    minions = outputs.get("minions") or {}
    first = first_control_plane(outputs) if minions else None
    host = (minions.get(first) or {}).get("hostname")
    others = [m for m, i in minions.items() if i.get("role") == "control_plane" and m != first]
    if host and host in dep.settings.replace and not others:
        raise InputError(
            f"--replace {host}: {host} is the only control plane, and the cluster lives on "
            "its disk: a new server there would start another cluster",
            fix="add control planes first (num_control_plane = 3), then replace it; or "
            "bring its server back with its disk (docs/day-two.md, Nodes, Replace a node)")


def retired_minions(dep):
    """The minion ids whose servers the last apply destroyed."""
    return sorted(_last_apply(dep).get("retired") or [])


def configure_master(master, pillar, targets):
    """
    Apply the salt_master formula to the master before the orchestration: a changed
    configuration restarts the master (deferred by the formula, so the run that changed it
    can return), and a restart inside the orchestration would cut it off. After a restart,
    waits until ``targets`` (minions already accepted) answer again.
    """
    master_id = salt_master_id(pillar)
    if not master_id:
        return {"skipped": "no salt master in the Terraform pillar"}
    ret = master.salt([master_id], "state.apply", "salt_master", timeout=120)
    if master_id not in ret:
        raise ConvergeError(
            f"the salt master's own minion {master_id} did not answer state.apply salt_master",
            fix="check salt-minion on the salt master (systemctl status salt-minion)",
        )
    result = ret[master_id]
    bad = failed_states(result)
    if bad:
        raise ConvergeError(
            f"configuring the salt master failed at {bad[0][0]}",
            fix="fix the salt_master pillar or formula and re-run kos converge",
            details=[f"{sid}: {comment}" for sid, comment in bad],
        )
    changed = sorted(
        state.get("__id__", key) for key, state in result.items()
        if isinstance(state, dict) and state.get("changes")
    )
    # The formula schedules a restart only where it manages the service (not under
    # a test master): wait only when that deferred restart was scheduled.
    if "salt_master-service-restart-deferred" in changed:
        ui.info("the salt master's configuration changed: waiting for its restart")
        master.wait_restarted()
        master.wait_responding(targets)
    return {"changed": changed}


def select_targets(expected, exclude=(), limit=()):
    """The minions a converge works on: ``limit`` (default all), less ``exclude``."""
    for option, ids in (("--exclude", exclude), ("--limit", limit)):
        unknown = sorted(set(ids) - set(expected))
        if unknown:
            raise InputError(
                f"{option} {', '.join(unknown)}: not a minion of this cluster",
                fix=f"use minion ids from the outputs: {', '.join(expected)}",
            )
    targets = sorted((set(limit) or set(expected)) - set(exclude))
    if not targets:
        raise InputError(
            "--exclude/--limit leave no minion to converge",
            fix="exclude fewer minions, or limit to minions you do not exclude",
        )
    return targets


def accept_keys(dep, master, expected, only, syndics=()):
    """Accept the keys of ``only`` (of the ``expected`` minions) against what their
    consoles printed; what was accepted, unverified and pending unexpectedly."""
    result = master.wait_and_accept(
        expected,
        timeout=dep.settings.wait_minions,
        only=only,
        consoles=console_records(dep, only),
        trust_unverified=dep.settings.trust_unverified,
        syndics=syndics,
    )
    return {key: result[key] for key in ("accepted", "unverified", "unexpected_pending")}


def check_answering(master, targets, accepted, wait):
    """
    Before anything changes: every targeted minion answers, or the run stops naming the
    silent ones. Minions whose key was just accepted get ``wait`` seconds to connect; the
    others, already in the cluster, a short grace (a minion restarting).
    """
    answering, silent = master.answering(targets, timeout=wait if accepted else ANSWER_GRACE)
    if silent:
        raise ConvergeError(
            f"minions do not answer: {', '.join(silent)}; nothing was changed",
            fix="start salt-minion on them (systemctl status salt-minion; ports 4505/4506 to "
            "the master), or converge the others without them: kos converge "
            + " ".join(f"--exclude {m}" for m in silent),
        )
    return answering


class ConvergeStep(enum.StrEnum):
    """The steps of a converge, in the order they run, each recorded under its value in
    steps.json; converge runs no other."""

    SYNDIC_KEYS = "salt-keys-syndics"
    RETIRED_KEYS = "salt-keys-retired"
    REBUILT_KEYS = "salt-keys-rebuilt"
    MASTER_KEY = "salt-keys-master"
    TREES = "salt-trees"
    PILLAR = "salt-pillar"
    MASTER_CONFIG = "salt-master-config"
    KEYS = "salt-keys"
    CCM_CREDENTIAL = "ccm-credential"
    ORCHESTRATE = "orchestrate"
    CCM_CREDENTIAL_RETIRE = "ccm-credential-retire"


def converge(dep, always=True, exclude=(), limit=()):
    """The master's own minion, trees, pillar, the master's configuration, the other keys,
    orchestration; every step recorded, and re-run by kos converge."""
    outputs = dep.require_outputs()
    ccm.refuse_repository_credentials(dep.settings.pillar_dir)
    expected = sorted(outputs["minions"])
    targets = select_targets(expected, exclude, limit)
    fp = fingerprint(outputs, *([sorted(exclude), sorted(limit)] if exclude or limit else []))
    settings = dep.settings
    tf_pillar = pillar_of(outputs)

    def run(step, *args, **kwargs):
        # A step not declared in ConvergeStep fails here, in every test that converges.
        return dep.steps.run(ConvergeStep(step), *args, **kwargs)

    with dep.master() as master:

        syndics = tf_pillar.get("kos", {}).get("salt_master", {}).get("syndics") or []
        joining = {}
        if syndics:
            # Every converge: an environment's syndic presents its key once that
            # environment is up, whenever that is.
            joining = run(
                ConvergeStep.SYNDIC_KEYS, fp,
                f"accept the keys of the syndics of {', '.join(syndics)} (this is a top master)",
                lambda: accept_syndics(dep, master, syndics), always=True,
            ) or {}

        def keys(only):
            return accept_keys(dep, master, expected, only, syndics=joining.get("ids", ()))

        retired = retired_minions(dep)
        if retired:
            run(
                ConvergeStep.RETIRED_KEYS, fingerprint(retired),
                f"forget the retired nodes {', '.join(retired)} (their keys and mine data)",
                lambda: master.delete_keys(retired),
            )
        rebuilt = rebuilt_minions(dep)
        if rebuilt:
            # Until then the master denies the new servers' keys (their minions keep
            # asking: rejected_retry); once per rebuild, so a re-run keeps what it accepted.
            run(
                ConvergeStep.REBUILT_KEYS,
                fingerprint(rebuilt, dep.steps.get(dep.backend.create_step).get("finished")),
                f"forget the old keys of the rebuilt {', '.join(rebuilt)} (their new servers "
                "present new ones)",
                lambda: master.delete_keys(rebuilt),
            )
        # The master is configured before the other minions are let in: a configuration
        # that changed restarts it, and with every minion connected each one would
        # authenticate again while the master cannot publish (bench/converge.py's fresh
        # converge shows the cost). Its own minion is all it needs.
        master_id = salt_master_id(tf_pillar)
        own = [master_id] if master_id in targets else []
        accepted_own = run(
            ConvergeStep.MASTER_KEY, fp, f"accept the key of the salt master's own minion "
            f"{master_id}", lambda: keys(own), always=always,
        ) if own else {}
        # Nothing changes unless every minion already in answers (a node down stops the
        # run here); those whose keys are still pending answer once accepted, below.
        members = sorted(set(targets) & set(master.keys()["minions"]))
        if members:
            with ui.step(f"check that {len(members)} minions answer"):
                check_answering(master, members, (accepted_own or {}).get("accepted"),
                                settings.wait_minions)
        run(
            ConvergeStep.TREES,
            fingerprint(fp, str(settings.formula_dir), str(settings.pillar_dir)),
            f"push the formula to {settings.state_tree} and the pillar to "
            f"{Path(settings.pillar_file).parent}",
            lambda: push_trees(master, settings),
            always=always,
        )
        run(
            ConvergeStep.PILLAR,
            fp,
            f"push the Terraform pillar to {settings.pillar_file}",
            lambda: push_pillar_layers(master, dep, outputs),
            always=always,
        )
        # No sync here: the orchestration syncs the minions whose modules may be stale
        # (kos.converge_need), so kos converge and salt-run orch.deploy do the same.
        run(
            ConvergeStep.MASTER_CONFIG,
            fp,
            "the salt master's own configuration, before any orchestration",
            lambda: configure_master(master, tf_pillar, members),
            always=always,
        )
        accepted = run(
            ConvergeStep.KEYS, fp, f"accept the keys of {len(targets)} minions",
            lambda: keys(targets), always=always,
        )
        newcomers = sorted(set(targets) - set(members))
        if newcomers:
            with ui.step(f"check that {len(newcomers)} minions answer"):
                check_answering(
                    master, newcomers, (accepted or {}).get("accepted"), settings.wait_minions
                )

        run(
            ConvergeStep.CCM_CREDENTIAL,
            fp,
            "the cloud-controller-manager's application credential, for the control planes",
            lambda: ccm_credential(master, dep, outputs),
            always=always,
        )

        # The orchestration's side of --exclude/--limit (orch.deploy reads these pillar keys).
        pillar = {"exclude": sorted(exclude), "limit": sorted(limit)}
        run(
            ConvergeStep.ORCHESTRATE,
            fp,
            "salt-run state.orchestrate orch.deploy"
            + (f" pillar='{json.dumps(pillar)}'" if exclude or limit else ""),
            lambda: orchestrated(master.orchestrate("orch.deploy", pillar)),
            always=always,
        )
        run(
            ConvergeStep.CCM_CREDENTIAL_RETIRE,
            fp,
            "delete the cloud-controller-manager's credentials no control plane uses",
            lambda: retire_ccm_credentials(master, dep, outputs),
            always=always,
        )
    return outputs


def orchestrated(summary):
    """The orchestrate step's record: how many steps ran and each one's seconds (where the
    time of a converge goes, for an operator and the benchmark)."""
    steps = summary.get("steps", [])
    return {
        "steps": len(steps),
        "seconds": {
            s["id"]: round(s["duration"] / 1000, 1)
            for s in steps
            if isinstance(s.get("duration"), (int, float))
        },
    }


def forget_host_keys(dep, hostnames):
    """A rebuilt host has new SSH host keys: drop the pinned old ones (the bastion and the
    master's, and a first control plane's, which `kos kubeconfig` reaches)."""
    outputs = dep.outputs()
    addresses = {m.get("hostname"): m.get("private_ip")
                 for m in (outputs.get("minions") or {}).values()}
    addresses.update(bastion=outputs.get("bastion_floating_ip"),
                     salt=outputs.get("salt_master_private_ip"))
    known = dep.state.path / "known_hosts"
    port = dep.settings.ssh_port
    for name in hostnames:
        address = addresses.get(name)
        if address and known.exists():
            host = address if port == 22 else f"[{address}]:{port}"
            subprocess.run(["ssh-keygen", "-R", host, "-f", str(known)], capture_output=True)
            ui.info(f"{name} was rebuilt: its old SSH host key is forgotten ({host})")


def up(dep, confirm):
    steps = dep.steps
    created = dep.backend.create_step
    if steps.status(created) != "done":
        confirm(
            f"create cluster {dep.cluster} with {dep.inputs.node_count} Kubernetes nodes"
            + ("" if dep.backend.name == "openstack" else f" on the {dep.backend.name} cloud")
        )
    if dep.settings.replace:
        refuse_replacing_the_only_control_plane(dep)
    # Once apply has begun, the project's usage includes this cluster: quotas are moot.
    apply_started = steps.status(created) is not None
    steps.run(
        "preflight",
        fingerprint(dep.inputs.fingerprint, dep.settings.cloud, dep.settings.os_cloud),
        "preflight",
        lambda: preflight(dep, check_quota=not apply_started),
        quiet_failure=True,
    )
    dep.use_outputs(dep.backend.create(dep.inputs, steps,
                                       leaving=lambda minions, replace=False: remove_nodes(
                                           dep, minions, replace)))
    forget_host_keys(dep, dep.settings.replace)
    # A rebuilt server needs everything converge does again (keys, trees, states).
    outputs = converge(dep, always=bool(dep.settings.replace))
    return outputs


# -- status / kubeconfig ---------------------------------------------------------------


def _kubernetes_members(master, first):
    try:
        dist = distributions.detect(master, first)
        return dist.name, dist.nodes(master, first), None
    except ConvergeError as exc:
        return None, {}, exc.problem


def highstates_from_records(records):
    """Past the job cache's ``keep_jobs_seconds`` a node's last highstate is gone from the
    master; its own record of its last successful converge (``kos.last_converged``) still
    tells. ``records``: ``{minion: return}``; a node without a record stays unknown."""
    found = {}
    for mid, rec in records.items():
        if isinstance(rec, dict) and isinstance(rec.get("at"), int):
            found[mid] = {
                "result": "ok",
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(rec["at"])),
                "source": "the node's converge record",
            }
    return found


def control_plane_ids(outputs):
    """The control planes' minion ids, sorted (the ones that hold certificates)."""
    return sorted(m for m, i in outputs["minions"].items() if i.get("role") == "control_plane")


def certificate_summary(found):
    """What ``kos status`` shows of a control plane's ``kos.certificates``."""
    return {"days_left": found.get("days_left"), "warn_days": found.get("warn_days"),
            "expiring": sorted(found.get("expiring") or {})}


def status(dep):
    outputs = dep.require_outputs()
    ids = sorted(outputs["minions"])
    first = first_control_plane(outputs)
    with dep.master() as master:
        keys = master.keys()
        answering, _ = master.answering(ids, timeout=STATUS_PING)
        highstates = master.last_highstates(ids)
        aged = [m for m in ids if m not in highstates and m in answering]
        if aged:
            records = master.salt(aged, "kos.last_converged", timeout=STATUS_PING)
            highstates.update(highstates_from_records(records))
        dist_name, members, k8s_error = _kubernetes_members(master, first)
        control_planes = [m for m in control_plane_ids(outputs) if m in answering]
        certs = (master.salt(control_planes, "kos.certificates", timeout=STATUS_PING)
                 if control_planes else {})
    accepted = set(keys.get("minions", []))
    pending = set(keys.get("minions_pre", []))
    # a top master's syndics (other environments' masters), as kos converge last found them
    syndics = (dep.steps.get(ConvergeStep.SYNDIC_KEYS).get("detail") or {}).get("ids") or []
    nodes = []
    for mid in ids:
        info = outputs["minions"][mid]
        entry = {
            "id": mid,
            "hostname": info.get("hostname"),
            "role": info.get("role"),
            "private_ip": info.get("private_ip"),
            "key": "accepted" if mid in accepted else ("pending" if mid in pending else "missing"),
            "reachable": mid in answering,
            "last_highstate": highstates.get(mid, {"result": "unknown"}),
        }
        if mid in outputs["kubernetes_nodes"]:
            member = members.get(info.get("hostname")) or members.get(mid)
            entry["kubernetes"] = {
                "member": bool(member),
                "ready": bool(member and member.get("ready")),
                "role": member.get("role") if member else None,
                "version": member.get("version") if member else None,
            }
        if isinstance(certs.get(mid), dict):
            entry["certificates"] = certificate_summary(certs[mid])
        nodes.append(entry)
    healthy = all(
        n["reachable"]
        and n["last_highstate"]["result"] == "ok"
        and n.get("kubernetes", {"member": True, "ready": True})["ready"]
        for n in nodes
    )
    return {
        "cluster": dep.cluster,
        "distribution": dist_name,
        # A cloud that runs this distribution as stand-ins says so in its outputs.
        "simulated": dist_name in (outputs.get("simulated") or ()),
        "api": outputs.get("api_floating_ip"),
        "healthy": healthy,
        "kubernetes_error": k8s_error,
        "unexpected_keys": sorted((accepted | pending) - set(ids) - set(syndics)),
        "nodes": nodes,
        "salt_master_floating_ip": outputs.get("salt_master_floating_ip"),
        "syndics": {
            mid: "accepted" if mid in accepted else ("pending" if mid in pending else "missing")
            for mid in syndics
        },
    }


KUBECONFIGS = "kubeconfigs.json"


def kubeconfig(dep, output, server=None):
    outputs = dep.require_outputs()
    first = first_control_plane(outputs)
    address = (outputs["minions"].get(first) or {}).get("private_ip")
    if not address:
        raise ConvergeError(
            f"the infrastructure's outputs give no private address for {first}",
            fix="re-run terraform apply (kos up) with this repository's terraform/",
        )
    pin_node_host_key(dep, first, address)
    with dep.master() as master:
        dist = distributions.detect(master, first)
        try:
            ret = dist.kubeconfig(master, first, address, dep.settings.formula_dir)
        except ConvergeError as exc:
            raise ConvergeError(
                f"cannot read the admin kubeconfig on {first}: {exc.problem}",
                fix="run kos converge until the first control plane is up, then retry",
                details=exc.details,
            ) from exc
    if not isinstance(ret, str) or "clusters:" not in ret:
        raise ConvergeError(
            f"{first} has no admin kubeconfig",
            fix="run kos converge until the first control plane is up, then retry",
        )
    if server is None:
        if not outputs.get("api_floating_ip"):
            raise InputError(
                "the cluster has no API floating IP (first_control_plane_access = admin_network)",
                fix=f"pass --server https://<k8s-cp-1 admin address>:{dist.api_port}",
            )
        server = f"https://{outputs['api_floating_ip']}:{dist.api_port}"
    text = distributions.rewrite_server(ret, server)
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Recorded first: an interrupted write still leaves kos down a file to remove.
    _record_kubeconfig(dep, path, text)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        os.fchmod(fh.fileno(), 0o600)
        fh.write(text)
    return path, server


def _digest(text):
    return hashlib.sha256(text.encode()).hexdigest()


def _written_kubeconfigs(dep):
    """``{absolute path: sha256 of what kos wrote there}``."""
    try:
        return json.loads(dep.state.file(KUBECONFIGS).read_text())
    except (OSError, ValueError):
        return {}


def _record_kubeconfig(dep, path, text):
    dep.state.ensure()
    written = _written_kubeconfigs(dep)
    written[str(Path(path).absolute())] = _digest(text)
    dep.state.file(KUBECONFIGS).write_text(json.dumps(written, indent=1))


def remove_kubeconfigs(dep):
    """
    The admin kubeconfigs ``kos kubeconfig`` wrote for this cluster go with it; one that
    changed since (merged into another, say) stays, with a warning. The removed paths.
    """
    removed = []
    for name, digest in _written_kubeconfigs(dep).items():
        path = Path(name)
        try:
            if _digest(path.read_text()) != digest:
                ui.warn(f"{path} changed since kos kubeconfig wrote it: left in place; it "
                        f"holds the admin credential of the destroyed cluster {dep.cluster}")
                continue
            path.unlink()
            removed.append(name)
        except FileNotFoundError:
            pass
        except (OSError, UnicodeDecodeError) as exc:
            ui.warn(f"cannot remove the kubeconfig {path}: {exc}")
    dep.state.file(KUBECONFIGS).unlink(missing_ok=True)
    return removed


# -- down ------------------------------------------------------------------------------


def drain(dep):
    """Best effort: drain and delete every node but the first control plane, via Salt."""
    try:
        outputs = dep.outputs()
    except Exception as exc:  # noqa: BLE001 - down must proceed without outputs
        ui.warn(f"no outputs, nodes not drained: {exc}")
        return {"drained": []}
    if not outputs or missing_outputs(outputs):
        ui.info("no infrastructure outputs: nothing to drain")
        return {"drained": []}
    first = first_control_plane(outputs)
    order = sorted(
        (mid for mid, n in outputs["kubernetes_nodes"].items() if mid != first),
        key=lambda mid: (outputs["kubernetes_nodes"][mid].get("role") != "worker", mid),
    )
    done = []
    try:
        with dep.master() as master:
            dist = distributions.detect(master, first)
            if dist.name in (outputs.get("simulated") or ()):
                ui.info("a simulated cluster runs no workloads: nothing to drain")
                return {"drained": []}
            for mid in order:
                node = outputs["minions"].get(mid, {}).get("hostname") or mid.split(".")[0]
                for verb, action in (("drain", dist.drain), ("delete", dist.delete)):
                    try:
                        out = action(master, first, node)
                        ui.ok(f"{node}: {str(out).strip() or verb}")
                    except ConvergeError as exc:
                        ui.warn(f"{node}: {verb} failed: {exc.problem}")
                done.append(node)
    except ConvergeError as exc:
        ui.warn(f"salt master unreachable, nodes not drained: {exc.problem}")
    return {"drained": done}


def down(dep, confirm):
    confirm(f"destroy cluster {dep.cluster} and everything it left in the project")
    dep.steps.run(
        "drain",
        fingerprint(dep.cluster),
        "drain and delete Kubernetes nodes (best effort)",
        lambda: drain(dep),
        always=True,
    )
    destroyed = False
    try:
        dep.backend.destroy(dep.inputs, dep.steps)
        destroyed = True
    finally:
        # Once the servers are gone (while they stand, the kubeconfigs are the way in),
        # even when a leak found afterwards fails the run.
        if destroyed or dep.steps.status("terraform-destroy") == "done":
            for path in remove_kubeconfigs(dep):
                ui.ok(f"admin kubeconfig {path} removed")
    # The next servers print keys of their own.
    trust.Consoles(dep.state.path).path.unlink(missing_ok=True)
    dep.steps.forget(*[name for name in list(dep.steps.records) if name != "terraform-destroy"])
