"""Guards (the exit_if_* functions of microk8s-resources/actions/common/utils.sh and the
wrappers' worker-node checks, in https://github.com/canonical/microk8s), readiness and addon
status shared by the microk8s subcommands."""

import getpass
import json
import os
import sys
import time

from . import catalog, common, datastore

NOT_RUNNING = "microk8s is not running. Use microk8s inspect for a deeper inspection."
STOPPED = "microk8s is not running, try microk8s start"


class Exit(Exception):
    """Raised by guards; carries the process exit code."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code


def _user():
    try:
        return os.environ.get("USER") or getpass.getuser()
    except Exception:
        return "root"


def _exit_unless_permitted(write, kube_owner=None):
    """The message utils.sh and utils.py print when the user cannot read the credentials."""
    if os.access(common.data("credentials", "client.config"), os.R_OK):
        return
    user = _user()
    write(
        "Insufficient permissions to access MicroK8s.",
        "You can either try again with sudo or add the user {} to the 'microk8s' group:".format(user),
        "",
        "    sudo usermod -a -G microk8s {}".format(user),
        "    sudo chown -R {} ~/.kube".format(kube_owner or user),
        "",
        "After this, reload the user groups either via a reboot or by running 'newgrp microk8s'.",
    )
    raise Exit(1)


def exit_if_no_permissions():
    """utils.sh exit_if_no_permissions (stderr)."""
    _exit_unless_permitted(common.err)


def exit_if_no_permission_py():
    """common/utils.py exit_if_no_permission (stdout, with $USER left unexpanded)."""
    _exit_unless_permitted(common.out, kube_owner="$USER")


def is_worker():
    return os.path.exists(common.lock("clustered.lock"))


def is_stopped():
    return os.path.exists(common.lock("stopped.lock"))


def is_ha():
    return os.path.isfile(common.lock("ha-cluster"))


def exit_if_stopped_stderr():
    if is_stopped():
        common.err(STOPPED)
        raise Exit(1)


def services_active():
    rec = common.load_install()
    return bool(rec and rec.get("services_active", True))


def is_cluster_ready(with_ready_node=True):
    """common/utils.py is_cluster_ready: service/kubernetes exists and (some node is Ready)."""
    if is_stopped() or not services_active():
        return False
    ds = datastore.load()
    if not ds or not datastore.has_resource(ds, "service/kubernetes"):
        return False
    return not with_ready_node or any(n["ready"] for n in ds["nodes"])


def wait_for_ready(timeout, with_ready_node=True):
    end = time.time() + timeout
    while True:
        if is_cluster_ready(with_ready_node):
            return True
        if timeout and time.time() > end:
            return False
        time.sleep(2)


def repo_track(repo):
    text = common.read_file(os.path.join(common.snap_common(), "addons", repo, ".kos-standin-track"))
    if text:
        return text.strip()
    rec = common.load_install() or {}
    return rec.get("track", catalog.LATEST_TRACK)


def available_addons():
    base = os.path.join(common.snap_common(), "addons")
    found = []
    try:
        repos = os.listdir(base)
    except OSError:
        repos = []
    for repo in repos:
        if os.path.isfile(os.path.join(base, repo, "addons.yaml")):
            found.extend(catalog.repository(repo, repo_track(repo)))
    return sorted(found, key=lambda a: (a["repository"], a["name"]))


def is_enabled(addon, ds):
    check = addon["check_status"]
    if ds and datastore.has_resource(ds, check):
        return True
    return os.path.isfile(common.expand_snap_vars(check))


def get_status(addons, ready):
    enabled, disabled = [], []
    if ready:
        ds = datastore.load()
        for addon in addons:
            (enabled if is_enabled(addon, ds) else disabled).append(addon)
    return enabled, disabled


def get_addon_by_name(addons, name):
    parts = name.split("/")
    if len(parts) == 2:
        repo, addon_name = parts
    else:
        repo, addon_name = None, name if len(parts) > 2 else parts[0]
    return [a for a in addons if a["name"] == addon_name and (not repo or a["repository"] == repo)]


def version_record():
    return common.load_install() or {"version": "", "revision": 0, "track": catalog.LATEST_TRACK}


def update_datastore(mutator):
    """Apply `mutator(ds)` under the datastore lock, then replicate to the other members."""
    with datastore.lock():
        ds = datastore.load()
        mutator(ds)
        ds["revision"] += 1
        datastore.save(ds)
    datastore.replicate(ds)
    return ds


def flush():
    sys.stdout.flush()
    sys.stderr.flush()


# --------------------------------------------------------------------------- node status reports


def control_plane_agents():
    """Cluster-agent addresses of the control plane a worker joined (written by join_worker)."""
    try:
        agents = json.loads(common.read_file(common.data("var", "kos-standin", "control-plane-agents.json"), "[]"))
    except ValueError:
        return []
    return agents if isinstance(agents, list) else []


def post_to_control_plane(path, payload, ca_fp=None):
    """A worker's request to the first control-plane agent that accepts it (the apiserver proxy
    balances a worker's kubelet over the control-plane nodes).  True once one answered 200."""
    from . import pki, transport  # late: only cluster code needs them

    if ca_fp is None:
        try:
            ca_fp = pki.ca_fingerprint()
        except (OSError, ValueError):
            return False
    payload = dict(payload, ca=ca_fp)
    for member_agent in control_plane_agents():
        host, port = transport.split_hostport(member_agent)
        try:
            status, _ = transport.post(host, port, path, payload, timeout=10)
        except OSError:
            continue
        if status == 200:
            return True
    return False


def _report_pending_path():
    return common.data("var", "kos-standin", "node-report-pending")


def mark_node_report_pending():
    """After a refresh: the node has not told the cluster about its new version yet."""
    common.touch(_report_pending_path())


def report_node_status():
    """What the kubelet does when it starts: the Node object of this node turns Ready and shows
    the installed version (nodeInfo.kubeletVersion/kubeProxyVersion, VERSION).  Nothing else of
    the node entry changes (a cordoned node stays cordoned).  A worker's Node lives in the
    control plane's datastore: posted to a control-plane agent (agentd handle_node_status), which
    replicates it; a control-plane node updates its own copy and replicates it.
    True when the cluster has it."""
    from . import netinfo

    version = version_record().get("version", "")
    name = netinfo.hostname().lower()
    if is_worker():
        return post_to_control_plane("/kos-standin/v1/node-status", {"name": name, "ready": True, "version": version})
    ds = datastore.load()
    node = datastore.find_node(ds, name=name) if ds else None
    if not node:
        return True  # not (or no longer) a Node of its datastore: nothing to report
    if node["ready"] and node["version"] == version:
        return True

    def mut(d):
        entry = datastore.find_node(d, name=name)
        if entry:
            entry["ready"] = True
            entry["version"] = version

    update_datastore(mut)
    return True


def report_node_if_pending():
    if os.path.exists(_report_pending_path()) and report_node_status():
        common.remove(_report_pending_path())
