"""
kos glue: pillar validation (the schema is saltext.kos.utils.kos_schema), this node's roles,
and the join information a control-plane node publishes through the mine.
"""

import datetime
import json
import logging
import os
import shutil
import tempfile
import time

import salt.utils.files
import salt.utils.yaml
from salt.exceptions import CommandExecutionError

from saltext.kos import loader
from saltext.kos.utils import kos_backup, kos_inputs, kos_schema, kos_state

log = logging.getLogger(__name__)

__virtualname__ = "kos"

DEFAULT_STATE_DIR = "/etc/kos"
# What this node's last converge was made of (see record_converged).
CONVERGED_RECORD = "converged.json"


def __virtual__():
    return __virtualname__


def _formula_defaults():
    """Each formula's defaults.yaml, which its map merges the pillar over: rules across keys
    (an addon alias, ttl against min_remaining) judge what the formulas will see."""
    saltenv = __opts__.get("saltenv") or "base"
    defaults = {}
    for formula in kos_schema.formulas():
        text = __salt__["cp.get_file_str"](f"salt://{formula}/defaults.yaml", saltenv=saltenv)
        defaults[formula] = salt.utils.yaml.safe_load(text) if text else {}
    return defaults


def _pillar():
    """The pillar this job was given, as a plain dict: the minion's in-memory pillar (as its
    last refresh left it), or inside a state run the one that run compiled."""
    return __pillar__.value() if hasattr(__pillar__, "value") else dict(__pillar__)


def check_pillar(pillar, defaults=None):
    """Return the list of problems in ``pillar`` (empty when it is valid)."""
    return kos_schema.check(pillar, defaults)


def pillar_errors(pillar=None):
    """
    Return this minion's pillar problems, one line per bad key naming the key and the
    fix; empty when the pillar is valid. The top file asks this before it reads any value.

    pillar
        The pillar to judge; by default the one this job was given.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.pillar_errors
    """
    pillar = _pillar() if pillar is None else pillar
    # A layer that does not render leaves the rest of the pillar incomplete: say that first.
    render_errors = pillar.get("_errors") or []
    if render_errors:
        return ["pillar did not render (fix the named SLS file): " + str(e) for e in render_errors]
    return check_pillar(pillar, _formula_defaults())


def validate_pillar():
    """
    Validate this minion's pillar before anything changes. Raises with one line per
    bad key (naming the key and the fix); returns True when the pillar is valid.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.validate_pillar
    """
    errors = pillar_errors()
    if errors:
        raise CommandExecutionError("invalid pillar:\n" + "\n".join(errors))
    return True


def prepare_converge():
    """
    What a converge needs from this node before any node changes: its pillar validated
    (raises like ``validate_pillar``) and then, only when valid, its mine data sent (its
    address, for every other node's /etc/hosts). One job, because each job of an
    orchestration costs the master a round trip to every minion.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.prepare_converge
    """
    validate_pillar()
    return __salt__["mine.update"]()


def installed_release():
    """
    The version of saltext.kos installed in the Python that runs this minion now, read
    from its package metadata (not the modules loaded, which may be older until they are
    reloaded); None when none is. The formula's kos.extension asks it before anything
    else: a minion that has the master's release installs nothing, without asking pip.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.installed_release
    """
    return loader.installed()


def pillar_schema():
    """
    Return the pillar schema: every key, its type, range and meaning (JSON Schema
    draft 4, declared with salt.utils.schema in saltext.kos.utils.kos_schema).

    CLI Example:

    .. code-block:: bash

        salt-call kos.pillar_schema --out=yaml
    """
    return kos_schema.schema()


def roles():
    """
    Return this minion's roles in the deployment (salt_master, bastion,
    control_plane, worker, first_control_plane, kubernetes_node), as the pillar
    layer ``kos/derived.sls`` derived them from the Terraform layer.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.roles
    """
    return list(__pillar__.get("kos", {}).get("roles", []))


def state_dir():
    return __salt__["config.get"]("kos:state_dir", DEFAULT_STATE_DIR)


def join_info(node):
    """
    Return the join credential the first control plane issued for ``node`` (the mine
    publishes it under ``kos_join_<node>``, readable by that minion only): the node it is
    for, its role, and for microk8s the connection string, for kubeadm the bootstrap token
    and CA hash (and, for a control plane only, the certificate key), with the expiry.
    Empty when nothing is issued for ``node``.

    node
        The minion id of the joining node.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos.join_info k8s-worker-1.example.com
    """
    path = kos_state.credential_file(__salt__, node)
    try:
        with salt.utils.files.fopen(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("kos: unreadable join credential %s: %s", path, exc)
        return {}


# --- what a converge of this node needs -------------------------------------------------------


def _inputs(pillar, tree=None):
    """What this node's highstate is made of (``saltext.kos.utils.kos_inputs``)."""
    plain = kos_schema.plain(pillar)
    return kos_inputs.inputs(plain, __opts__["id"], tree)


def _distribution(pillar):
    """kos:distribution, from Terraform's kubernetes_distribution; missing, an error naming
    where it comes from (``kos_schema.distribution``), never a default."""
    try:
        return kos_schema.distribution(pillar)
    except ValueError as exc:
        raise CommandExecutionError(str(exc)) from exc


def _kubernetes(pillar):
    """This node's place in the cluster: role, and whether it is initialised or joined
    (None: could not tell), and whether it is ``fresh``: it holds nothing of a cluster (no
    microk8s snap; kubeadm never initialised or joined it), as a server rebuilt under the
    node's name would. None for a host that is no Kubernetes node."""
    kos = pillar.get("kos") or {}
    me = __opts__["id"]
    node = (kos.get("nodes") or {}).get(me)
    if not node:
        return None
    distribution = _distribution(pillar)
    first = kos.get("first_control_plane") == me
    role = node.get("role")
    ret = {"role": role, "first": first, "initialised": False, "joined": False, "fresh": True}
    try:
        if distribution == "microk8s" and "microk8s.status" in __salt__:
            # a stopped node keeps its datastore: not fresh, though not initialised
            ret["fresh"] = False
            st = __salt__["microk8s.status"]()
            ret["initialised"] = bool(st["running"] or st["worker"])
            if st.get("stopped"):
                # a stopped control plane may well be a member: never "not joined" on a guess
                ret.update(joined=None, error="microk8s is stopped: whether it joined its "
                                              "cluster cannot be told until it is started "
                                              "(microk8s start)")
            else:
                ret["joined"] = ret["initialised"] and (
                    first or __salt__["microk8s.is_clustered"]())
        elif distribution == "kubeadm" and "kubeadm.init_status" in __salt__:
            kubeadm = pillar.get("kubeadm") or {}
            # where kubeadm keeps its files is the execution module's to resolve
            # (kubeadm:kube_dir, minion configuration first), as for the states that act on it
            if first:
                done = __salt__["kubeadm.init_status"]()["initialized"]
                ret["initialised"] = ret["joined"] = bool(done)
            else:
                external = ((kubeadm.get("etcd") or {}).get("external") or {}).get("endpoints")
                # the node name kubeadm/map.jinja gives this host
                st = __salt__["kubeadm.join_status"](
                    me.split(".")[0].lower(), control_plane=role == "control_plane",
                    stacked_etcd=not external)
                ret["joined"] = bool(st["joined"])
            ret["fresh"] = not ret["joined"]
    except (CommandExecutionError, KeyError, TypeError) as exc:
        ret.update(initialised=None, joined=None, fresh=None, error=str(exc))
    return ret


def kubernetes_state():
    """
    This node's place in the cluster: ``{"role", "first", "initialised", "joined"}``
    (None for a host that is no Kubernetes node). The first control plane publishes it
    in the mine (``kos_kubernetes``): the master's reactor converges a node that starts
    only once the cluster it would join is up.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.kubernetes_state
    """
    pillar = _pillar()
    return _kubernetes(pillar)


def _record_path():
    return kos_state.state_file(__salt__, CONVERGED_RECORD)


def converge_need(tree=None):
    """
    What a converge of this node needs, judged on a freshly compiled pillar against the
    record of its last converge (``record_converged``):

    ``highstate``
        Why this node needs its highstate: never converged, not joined, the state tree or
        named pillar sections changed. Empty when nothing it is made of changed.

    ``learn``
        True when the deployment's members changed since: /etc/hosts must learn them.

    ``members``
        The digest of the deployment's members now (``learn_members`` notes it).

    ``sync``
        True unless this node's last converge was made of this very state tree (the
        extension's release is part of it, installed then): only then may a converge skip
        installing it here.

    ``kubernetes``
        For a Kubernetes node: its role, whether it is the first control plane, and
        whether it is initialised / joined (None when that could not be told).

    ``problems``
        What is wrong with the pillar just compiled (``pillar_errors``; empty: valid),
        judged when this node takes part (it needs its highstate, or it is the first
        control plane, which issues join credentials) and its extension, the pillar
        schema among it, is the release of this state tree. None when not judged here:
        the orchestration judges it after installing it (``prepare_converge``).

    tree
        Digest of the state tree the orchestration serves now.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.converge_need tree=<digest>
    """
    # compiled now (the pillar files may have changed since this minion's refresh), unmasked:
    # a digest of masked values would miss a changed secret; a refresh before costs more
    # (measured at 25 workers) than this compile
    pillar = __salt__["pillar.items"](unmask=True)
    now = _inputs(pillar, tree)
    record = kos_state.read_json(_record_path()) or {}
    kubernetes = _kubernetes(pillar)
    reasons = []
    if pillar.get("_errors"):
        reasons.append("its pillar does not render")
    if not record.get("pillar"):
        reasons.append("never converged by kos")
    else:
        if tree is not None and record.get("tree") != tree:
            reasons.append("the state tree changed")
        changed = kos_inputs.changed(record, now)
        if changed:
            reasons.append("pillar changed: " + ", ".join(changed))
    if kubernetes and not kubernetes["joined"]:
        reasons.append("not initialised" if kubernetes["first"] else "not joined")
    sync = tree is None or not record.get("pillar") or record.get("tree") != tree
    # Judged on this compile, a pillar change costs no refresh and no validation job
    # before the wave; an older schema would misjudge it, so a node to sync waits.
    judged = not sync and (reasons or (kubernetes or {}).get("first"))
    return {
        "highstate": reasons,
        "learn": record.get("members") != now["members"],
        "members": now["members"],
        "sync": sync,
        "kubernetes": kubernetes,
        "problems": pillar_errors(pillar) if judged else None,
    }


def last_converged():
    """
    When this node's last converge through kos succeeded (``at``, seconds since the epoch),
    the state tree it was made of and who ran it (``by``: ``orchestration`` or
    ``reactor``), from its own record; None when kos never converged it. ``kos status``
    asks for it.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.last_converged
    """
    record = kos_state.read_json(_record_path()) or {}
    if not record.get("pillar"):
        return None
    return {"at": record.get("at"), "tree": record.get("tree"), "by": record.get("by")}


def record_converged(tree=None, hosts=None, by=None):
    """
    Note what this node's converge was made of (``<kos:state_dir>/converged.json``, root
    only), after its highstate succeeded: ``converge_need`` compares the next run's inputs
    with it.

    hosts
        The managed block in the hosts file this highstate wrote (``{"file", "start",
        "end"}``: its path and markers), or None when core does not manage it:
        ``learn_members`` rewrites that block until the next highstate.

    by
        Who ran the converge (``orchestration`` or ``reactor``), for ``kos status``.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.record_converged tree=<digest>
    """
    pillar = _pillar()
    record = dict(_inputs(pillar, tree), at=int(time.time()), hosts=hosts, by=by)
    kos_state.write_json(_record_path(), record)
    return True


# The lines of the managed hosts block: the template core.hosts renders too.
HOSTS_TEMPLATE = "salt://core/hosts.jinja"


def learn_members(members, saltenv="base"):
    """
    The deployment's members changed and nothing else this node is made of: rewrite the
    hosts block its last highstate managed (from the mine, through the template core.hosts
    renders) and note ``members``, the digest ``converge_need`` answered, so the next
    orchestration leaves this node alone. No state run and no pillar compile: at 50
    workers that is what made adding one node slow. Returns the block's diff (empty: it
    was up to date), or None when this node was never converged whole (it needs its
    highstate; nothing is noted).

    saltenv
        The environment whose state tree holds the template.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.learn_members <digest>
    """
    path = _record_path()
    record = kos_state.read_json(path) or {}
    if not record.get("pillar"):
        return None
    diff = ""
    hosts = record.get("hosts")
    if hosts:
        text = __salt__["slsutil.renderer"](path=HOSTS_TEMPLATE, default_renderer="jinja",
                                            saltenv=saltenv, lines=True)
        text = str(text).strip()
        diff = __salt__["file.blockreplace"](
            hosts["file"], marker_start=hosts["start"], marker_end=hosts["end"],
            content=text + "\n" if text else "", append_if_not_found=True,
            show_changes=True)
    record["members"] = members
    kos_state.write_json(path, record)
    return diff


# --- certificates ---------------------------------------------------------------------------

CERTIFICATE_WARN_DAYS = 30
# Fired by check_certificates on a control plane whose certificates expire within warn_days.
CERTIFICATE_EVENT = "kos/certificates/expiring"


def certificate_warn_days():
    """
    ``kos:certificates:warn_days``: an expiry closer than this is reported, fires
    ``kos/certificates/expiring`` and is renewed by ``<distribution>.certificates``.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.certificate_warn_days
    """
    settings = (_pillar().get("kos") or {}).get("certificates") or {}
    return settings.get("warn_days", CERTIFICATE_WARN_DAYS)


def certificates():
    """
    The days left on this control plane's Kubernetes certificates, from the distribution's
    own check (``kubeadm certs check-expiration``, ``microk8s refresh-certs --check``):
    ``{"days_left": the fewest, "warn_days": kos:certificates:warn_days, "expiring":
    {name: days} of those within warn_days, "certificates": {name: days}}``. None on a
    node that holds none (not a control plane).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-*' kos.certificates
    """
    pillar = _pillar()
    node = ((pillar.get("kos") or {}).get("nodes") or {}).get(__opts__["id"]) or {}
    if node.get("role") != "control_plane":
        return None
    if _distribution(pillar) == "kubeadm":
        # where kubeadm keeps its files is the execution module's to resolve
        found = __salt__["kos_certs.certificates"]()
        days = {name: entry["days"] for table in found.values()
                for name, entry in table.items() if entry}
    else:
        days = __salt__["microk8s_certs.certificates"]()
    if not days:
        return None
    warn = certificate_warn_days()
    return {
        "days_left": min(days.values()),
        "warn_days": warn,
        "expiring": {name: left for name, left in sorted(days.items()) if left < warn},
        "certificates": dict(sorted(days.items())),
    }


def check_certificates():
    """
    ``certificates``, and the event ``kos/certificates/expiring`` (its data: this node's
    answer) when any expires within ``warn_days``: what the daily schedule the pillar
    gives every control plane runs (``schedule:kos-certificates``, kos/derived.sls), for
    a reactor or an operator's ``salt-run state.event`` to see.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-*' kos.check_certificates
    """
    found = certificates()
    if found and found["expiring"]:
        __salt__["event.send"](CERTIFICATE_EVENT, dict(found, id=__opts__["id"]))
    return found


# -- backups ----------------------------------------------------------------------------------

# Where a control plane writes a backup before it goes to the master (and is removed here).
BACKUP_DIR = "/var/lib/kos/backups"
# What takes a backup of each distribution's datastore: an etcd snapshot
# (https://kubernetes.io/docs/tasks/administer-cluster/configure-upgrade-etcd/
# #backing-up-an-etcd-cluster), or `microk8s dbctl backup`
# (https://microk8s.io/docs/backup-restore).
BACKUP_FUNCTIONS = {"kubeadm": "kos_etcd.etcd_snapshot", "microk8s": "microk8s_backup.backup"}


def backup(directory=BACKUP_DIR):
    """
    Take a backup of the cluster's datastore on this control plane (kubeadm: an etcd
    snapshot; microk8s: ``microk8s dbctl backup``), seal it with the control planes' key
    (``saltext.kos.utils.kos_backup``), push it to the salt master (``cp.push``; the master files
    it, ``salt_master.backups``) and remove it here. Return its name, size, revision, key count and hash.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos.backup
    """
    taken = __salt__[BACKUP_FUNCTIONS[_distribution(_pillar())]](directory)
    sealed = os.path.join(directory, kos_backup.sealed_name(taken["name"]))
    try:
        kos_backup.seal(taken["path"], sealed, taken["key_file"])
    finally:
        os.unlink(taken["path"])
    try:
        size = os.path.getsize(sealed)
        if not __salt__["cp.push"](sealed):
            raise CommandExecutionError(
                "the salt master refused the backup: file_recv is off (a master configured "
                "before backups: kos converge configures it), or the backup is larger than "
                "file_recv_max_size (salt_master:backups:max_mib)")
    finally:
        os.unlink(sealed)
    return {"name": os.path.basename(sealed), "size": size, "revision": taken["revision"],
            "keys": taken["keys"], "hash": taken["hash"]}


def backups(directory=None):
    """
    On the salt master: the sealed backups it keeps (salt_master:backups:dir), oldest
    first, each with its size and the UTC time in its name.

    CLI Example:

    .. code-block:: bash

        salt 'salt*' kos.backups
    """
    if not directory:
        directory = __salt__["pillar.get"]("salt_master:backups:dir", unmask=True) or \
            _formula_defaults()["salt_master"]["backups"]["dir"]
    names = kos_backup.oldest_first(
        os.listdir(directory) if os.path.isdir(directory) else [])
    return [{"name": n, "size": os.path.getsize(os.path.join(directory, n)),
             "time": _iso(kos_backup.unsealed_name(n).rsplit("-", 1)[-1])} for n in names]


def _iso(stamp):
    """A backup name's UTC time (20261125T180000Z) in ISO 8601's extended form."""
    try:
        return datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").strftime("%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return stamp


def restore_dqlite(source, saltenv="kos-backups"):
    """
    microk8s: fetch the sealed backup ``source`` from the salt master (``salt://<name>`` in
    ``saltenv``), open it with this control plane's cluster CA key and write its objects
    back into the running datastore (``microk8s dbctl restore``,
    https://microk8s.io/docs/backup-restore); the opened archive is removed. Run on one control plane: dqlite replicates it.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos.restore_dqlite salt://microk8s-k8s-cp-1-20261127T180000Z.kosbak
    """
    snap_data = __salt__["pillar.get"]("microk8s:snap_data", unmask=True) or \
        _formula_defaults()["microk8s"]["snap_data"]
    os.makedirs(BACKUP_DIR, mode=0o700, exist_ok=True)
    work = tempfile.mkdtemp(prefix="kos-restore-", dir=BACKUP_DIR)
    try:
        # dbctl finds the archive's directory by the archive's own name
        archive = os.path.join(work, kos_backup.unsealed_name(source) + ".tar.gz")
        kos_backup.fetch_opened(
            __salt__, source, archive, os.path.join(snap_data, "certs", "ca.key"), saltenv)
        return __salt__["microk8s_backup.restore_from"](archive)
    finally:
        shutil.rmtree(work, ignore_errors=True)
