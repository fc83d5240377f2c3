"""
The stacked etcd of a kubeadm control plane: its members (list, remove a gone one),
snapshots, and a restore into every member from one snapshot, as
https://kubernetes.io/docs/tasks/administer-cluster/configure-upgrade-etcd/ ("Backing up
an etcd cluster", "Restoring an etcd cluster") and
https://etcd.io/docs/v3.5/op-guide/recovery/ describe it.

etcdctl and etcdutl come from the etcd image this control plane runs (its static Pod
manifest names it), mounted read-only for the call: the client matches the server, and
nothing needs installing on either cloud.

:depends: ``ctr`` (containerd) on PATH
"""

import http.client
import json
import os
import shutil
import socket
import ssl
import tempfile
import time

import salt.utils.files
import salt.utils.yaml
from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_backup, kos_cli, kos_kubeadm

__virtualname__ = "kos_etcd"

ETCD_TOOLS_DIR = "usr/local/bin"
RESTORE_SUFFIX = ".kos-restore"
# where kubeadm's etcd serves its clients on each control plane (--listen-client-urls)
ETCD_CLIENT_PORT = 2379
STOPPED_DIR = "kos-stopped-manifests"
RESTORE_STOPS = ("kube-apiserver.yaml", "etcd.yaml")
# What the Kubernetes documentation suggests for a restore into a cluster whose clients
# have watched newer revisions (etcd's revisions only grow).
RESTORE_REVISION_BUMP = 1000000000


def __virtual__():
    return kos_cli.virtual(__virtualname__, "ctr", "is containerd installed?")


def _run(binary, args):
    return kos_cli.run(__salt__, [binary, *args])


def _kube_dir(kube_dir=None):
    return kos_kubeadm.kube_dir(__salt__, kube_dir)


def _static_pod(name, kube_dir=None):
    """The image and flags of this node's ``name`` static Pod (running or stopped aside)."""
    path = os.path.join(_kube_dir(kube_dir), "manifests", f"{name}.yaml")
    aside = os.path.join(_kube_dir(kube_dir), STOPPED_DIR, f"{name}.yaml")
    for candidate in (path, aside):
        if os.path.exists(candidate):
            with salt.utils.files.fopen(candidate) as fh:
                doc = salt.utils.yaml.safe_load(fh) or {}
            break
    else:
        raise CommandExecutionError(
            f"no {name} static Pod here ({path} is missing): etcd backups and restores run "
            "on control planes with stacked etcd")
    try:
        container = doc["spec"]["containers"][0]
    except (KeyError, IndexError, TypeError) as exc:
        raise CommandExecutionError(f"{path} has no container") from exc
    flags = dict(arg[2:].split("=", 1) for arg in container.get("command") or []
                 if arg.startswith("--") and "=" in arg)
    return container.get("image"), flags


def _api_port(kube_dir=None):
    return int(_static_pod("kube-apiserver", kube_dir)[1].get("secure-port", 6443))


class _EtcdTools:
    """The etcd image's root mounted read-only (``ctr images mount``) while in use."""

    def __init__(self, image):
        self.image = image
        self.root = None

    def __enter__(self):
        self.root = tempfile.mkdtemp(prefix="kos-etcd-tools-")
        try:
            _run("ctr", ["-n", "k8s.io", "images", "mount", self.image, self.root])
        except CommandExecutionError:
            os.rmdir(self.root)
            raise
        return self

    def __exit__(self, *exc):
        _run("ctr", ["-n", "k8s.io", "images", "unmount", "--rm", self.root])
        os.rmdir(self.root)

    def __call__(self, tool, args):
        return _run(os.path.join(self.root, ETCD_TOOLS_DIR, tool), args)


def _etcd_ca_key(flags):
    """The etcd CA's private key beside its certificate: what seals and opens a backup."""
    return os.path.splitext(flags["trusted-ca-file"])[0] + ".key"


def _etcd_client(flags):
    """etcdctl's flags to reach this node's own member with its own certificate."""
    return [f"--endpoints=https://127.0.0.1:{ETCD_CLIENT_PORT}", f"--cacert={flags['trusted-ca-file']}",
            f"--cert={flags['cert-file']}", f"--key={flags['key-file']}"]


def _member_list(tools, flags):
    out = tools("etcdctl", [*_etcd_client(flags), "member", "list", "--write-out=json"])["stdout"]
    try:
        members = json.loads(out).get("members") or []
    except (ValueError, AttributeError) as exc:
        raise CommandExecutionError("etcdctl member list printed no member list") from exc
    # etcdctl's JSON gives IDs as decimal numbers; member remove takes them in hex
    return [{"id": format(int(m["ID"]), "x"), "name": m.get("name") or "",
             "peer_urls": sorted(m.get("peerURLs") or [])} for m in members]


def etcd_member_list(kube_dir=None):
    """
    The members of the etcd cluster this control plane belongs to (``etcdctl member
    list``): each one's ID (hex), name (the node name kubeadm gave it; empty for a
    member added but never started) and peer URLs.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_etcd.etcd_member_list
    """
    image, flags = _static_pod("etcd", kube_dir)
    with _EtcdTools(image) as tools:
        return _member_list(tools, flags)


def etcd_member_remove(name, peer_url=None, kube_dir=None):
    """
    Remove from etcd, through this control plane, the member of node ``name`` (and one
    whose peer URL is ``peer_url``: a join that added its member but never started it
    left one without a name). For a control plane that is gone and cannot leave by
    itself (``kubeadm reset`` removes a live node's own member); never this node's own.
    Return the members removed.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_etcd.etcd_member_remove k8s-cp-3 peer_url=https://10.0.0.23:2380
    """
    image, flags = _static_pod("etcd", kube_dir)
    if name == flags.get("name"):
        raise CommandExecutionError(f"{name} is this node's own etcd member: remove it from "
                                    "another control plane")
    removed = []
    with _EtcdTools(image) as tools:
        for member in _member_list(tools, flags):
            if member["name"] == name or (peer_url and peer_url in member["peer_urls"]):
                tools("etcdctl", [*_etcd_client(flags), "member", "remove", member["id"]])
                removed.append(member)
    return removed


def _snapshot_status(tools, path):
    out = tools("etcdutl", ["snapshot", "status", path, "--write-out=json"])["stdout"]
    try:
        doc = json.loads(out)
    except ValueError as exc:
        raise CommandExecutionError(f"etcdutl printed no snapshot status for {path}") from exc
    return {"revision": doc.get("revision"), "keys": doc.get("totalKey"),
            "hash": doc.get("hash"), "size": doc.get("totalSize")}


def etcd_snapshot(directory, kube_dir=None):
    """
    Save a snapshot of this control plane's etcd member (``etcdctl snapshot save`` over
    ``https://127.0.0.1:2379`` with the member's own certificate) to
    ``<directory>/etcd-<node>-<UTC time>.db`` (mode 0600), check it (``etcdutl snapshot
    status``) and return its path, revision, key count, hash and the key that seals it
    (the etcd CA key, which only control planes hold).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_etcd.etcd_snapshot /var/lib/kos/backups
    """
    image, flags = _static_pod("etcd", kube_dir)
    name = f"etcd-{flags.get('name', 'member')}-{kos_backup.stamp()}"
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, name + ".db")
    with _EtcdTools(image) as tools:
        old = os.umask(0o077)
        try:
            tools("etcdctl", [*_etcd_client(flags), "snapshot", "save", path])
        finally:
            os.umask(old)
        status = _snapshot_status(tools, path)
    return {"path": path, "name": name, "image": image, **status,
            "key_file": _etcd_ca_key(flags)}


def etcd_restore_stage(source, initial_cluster, token, saltenv="kos-backups", kube_dir=None):
    """
    Fetch the sealed backup ``source`` from the salt master (``salt://<name>`` in
    ``saltenv``), open it with this control plane's etcd CA key and restore it into
    ``<etcd data dir>.kos-restore`` for this member (its own ``--name`` and peer URL from
    the etcd manifest, the whole cluster's ``initial_cluster``, a ``token`` of this
    restore), ready to take the data directory's place; the running member is left alone
    and the opened snapshot removed. A staging left by an earlier try is replaced. Return
    the staging directory.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_etcd.etcd_restore_stage salt://etcd-k8s-cp-1-20261127T180000Z.kosbak \\
            k8s-cp-1=https://10.0.0.20:2380 kos-restore-1
    """
    image, flags = _static_pod("etcd", kube_dir)
    data = flags["data-dir"].rstrip("/")
    staging = data + RESTORE_SUFFIX
    os.makedirs(os.path.dirname(data), exist_ok=True)
    work = tempfile.mkdtemp(prefix="kos-restore-", dir=os.path.dirname(data))
    try:
        snapshot = kos_backup.fetch_opened(
            __salt__, source, os.path.join(work, "snapshot.db"), _etcd_ca_key(flags), saltenv)
        shutil.rmtree(staging, ignore_errors=True)
        with _EtcdTools(image) as tools:
            tools("etcdutl", [
                "snapshot", "restore", snapshot, "--data-dir", staging,
                "--name", flags["name"], "--initial-cluster", initial_cluster,
                "--initial-cluster-token", token,
                "--initial-advertise-peer-urls", flags["initial-advertise-peer-urls"],
                # past every revision the API servers' and controllers' caches have seen,
                # and compacted there: they re-list instead of trusting what they hold
                "--bump-revision", str(RESTORE_REVISION_BUMP), "--mark-compacted"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    os.chmod(staging, 0o700)
    return staging


def _listening(port, host="127.0.0.1"):
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def _wait(ready, deadline, failure):
    """Poll ``ready`` every 2 s until it holds; past ``deadline``, fail with ``failure``."""
    while not ready():
        if time.time() >= deadline:
            raise CommandExecutionError(failure)
        time.sleep(2)


def control_plane_stopped(timeout=180, kube_dir=None):
    """
    Stop this node's API server and etcd member for a restore: their manifests move to
    ``<kube_dir>/kos-stopped-manifests`` (the kubelet stops the Pods), then wait until
    neither port answers. Idempotent. Return the manifests moved now.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-*' kos_etcd.control_plane_stopped
    """
    manifests = os.path.join(_kube_dir(kube_dir), "manifests")
    aside = os.path.join(_kube_dir(kube_dir), STOPPED_DIR)
    os.makedirs(aside, mode=0o700, exist_ok=True)
    moved = []
    for name in RESTORE_STOPS:
        if os.path.exists(os.path.join(manifests, name)):
            os.rename(os.path.join(manifests, name), os.path.join(aside, name))
            moved.append(name)
    api = _api_port(kube_dir)
    _wait(lambda: not (_listening(ETCD_CLIENT_PORT) or _listening(api)), time.time() + float(timeout),
          f"etcd or the API server still answers {timeout} s after their manifests left "
          f"{manifests}")
    return moved


def etcd_restore_swap(kube_dir=None):
    """
    Put the staged restore in the data directory's place (the old one kept as
    ``<data dir>.before-restore-<UTC time>``), with the member stopped. Nothing staged:
    nothing to do (done already). Return the kept directory or None.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-*' kos_etcd.etcd_restore_swap
    """
    _, flags = _static_pod("etcd", kube_dir)
    if os.path.exists(os.path.join(_kube_dir(kube_dir), "manifests", "etcd.yaml")):
        raise CommandExecutionError("etcd still runs here: stop it first "
                                    "(kos_etcd.control_plane_stopped)")
    data = flags["data-dir"].rstrip("/")
    staging = data + RESTORE_SUFFIX
    if not os.path.isdir(staging):
        return None
    kept = f"{data}.before-restore-{kos_backup.stamp()}"
    if os.path.exists(data):
        os.rename(data, kept)
    else:
        kept = None
    os.rename(staging, data)
    return kept


def _etcd_healthy(kube_dir=None):
    """Whether this node's etcd member answers its ``/health`` as healthy: it has a leader
    and a quorum read went through (https://etcd.io/docs/v3.5/op-guide/monitoring/#health-check)."""
    _, flags = _static_pod("etcd", kube_dir)
    context = ssl.create_default_context(cafile=flags["trusted-ca-file"])
    context.load_cert_chain(flags["cert-file"], flags["key-file"])
    conn = http.client.HTTPSConnection("127.0.0.1", ETCD_CLIENT_PORT, context=context, timeout=5)
    try:
        conn.request("GET", "/health")
        return json.loads(conn.getresponse().read()).get("health") == "true"
    except (OSError, ValueError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def _put_back(kube_dir, names):
    manifests = os.path.join(_kube_dir(kube_dir), "manifests")
    aside = os.path.join(_kube_dir(kube_dir), STOPPED_DIR)
    back = []
    for name in names:
        if os.path.exists(os.path.join(aside, name)):
            os.rename(os.path.join(aside, name), os.path.join(manifests, name))
            back.append(name)
    if os.path.isdir(aside) and not os.listdir(aside):
        os.rmdir(aside)
    return back




def control_plane_started(timeout=300, kube_dir=None):
    """
    Put back the manifests ``control_plane_stopped`` moved aside: etcd's first, and the API
    server's once this member is healthy, as the Kubernetes documentation orders a restore
    (restore every etcd member, then start the API servers). An API server started before
    the members have a quorum fails, and the kubelet's crash back-off (up to five minutes)
    then delays it past any wait. Wait until the API server answers. Run it on every
    control plane at once: a member is healthy only once a quorum of them runs. Return the
    manifests put back.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-*' kos_etcd.control_plane_started
    """
    deadline = time.time() + float(timeout)
    etcd, api_server = RESTORE_STOPS[::-1]
    back = _put_back(kube_dir, [etcd])
    _wait(lambda: _etcd_healthy(kube_dir), deadline,
          f"etcd is not healthy {timeout} s after the restore started it")
    back += _put_back(kube_dir, [api_server])
    api = _api_port(kube_dir)
    _wait(lambda: _listening(api), deadline,
          f"the API server does not answer {timeout} s after the restore started it")
    return back
