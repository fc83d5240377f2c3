"""`microk8s dbctl`: backup and restore of the Kubernetes datastore
(https://microk8s.io/docs/backup-restore).

Mirrors microk8s-dbctl.wrapper + scripts/wrappers/dbctl.py: the guards run before argparse
(worker node -> exit 1; no kine socket or no ha-cluster lock -> exit 10), then
`backup [-o FILE]` / `restore FILE`.

The stand-in has no kine socket: it "exists" while the services run, i.e. neither `snap stop
microk8s` (install record services_active false) nor `microk8s stop` (stopped.lock) is in
effect -- the same conditions under which `microk8s status` reports the cluster not running.

The k8s-dqlite migrator is simulated.  A backup archive holds one directory named after the
backup (as the real `tar.add(..., arcname=basename)`), containing the Kubernetes objects the
stand-in keeps in its datastore (constructed layout):

    <name>/registry/minions/<node>.json   one file per Node (the datastore's node entry)
    <name>/registry/kos-standin/all.json  the `kubectl get all` objects (addon resources)

Nothing else: no dqlite membership, certificates, args or addon state files.  A restore
replaces the nodes and resources of the running datastore with the backup's and replicates the
result to the other control-plane members, like any other datastore write.  A missing or
unreadable archive raises out of tarfile (traceback, exit 1), as the real script does; an archive
without the expected directory or objects makes the migrator fail: `Restore process failed. 1`,
exit 3 (the migrator's own output and exit code there are constructed).
"""

import argparse
import datetime
import json
import os
import tarfile
import tempfile

from . import common, datastore
from . import mkcommon as mk

APISERVER_NOT_RUNNING = "Please ensure the kubernetes apiserver is running and HA is enabled."
MIGRATOR_FAILED_RC = 1


def parser():
    p = argparse.ArgumentParser(
        description="backup and restore the Kubernetes datastore.", prog="microk8s dbctl"
    )
    p.add_argument("--debug", action="store_true", help="print debug output")
    commands = p.add_subparsers(title="commands", help="backup and restore operations")
    restore_parser = commands.add_parser("restore")
    restore_parser.add_argument("backup-file", help="name of file with the backup")
    backup_parser = commands.add_parser("backup")
    backup_parser.add_argument("-o", metavar="backup-file", help="output filename")
    return p


def kine_exists():
    """The kine socket is there while k8s-dqlite runs (see the module docstring)."""
    return not mk.is_stopped() and mk.services_active() and datastore.load() is not None


def generate_backup_name():
    return "backup-{}".format(datetime.datetime.now().strftime("%Y-%m-%d-%H-%M-%S"))


def main(argv):
    mk.exit_if_no_permissions()
    mk.exit_if_no_permission_py()
    if mk.is_worker():
        common.out(
            "This MicroK8s deployment is acting as a node in a cluster.", "Please use the master node."
        )
        return 1
    if not kine_exists() or not mk.is_ha():
        common.out(APISERVER_NOT_RUNNING)
        return 10
    p = parser()
    args = p.parse_args(argv)
    if "backup-file" in args:
        fname = vars(args)["backup-file"]
        common.out("Restoring from {}".format(fname))
        return restore(fname, args.debug)
    if "o" in args:
        common.out("Backing up the datastore")
        return backup(vars(args)["o"], args.debug)
    p.print_help()
    return 0


# --------------------------------------------------------------------------- the simulated migrator


def _node_file(name):
    return os.path.join("registry", "minions", name + ".json")


RESOURCES_FILE = os.path.join("registry", "kos-standin", "all.json")


def dump_objects(db_dir):
    """migrator --mode backup-dqlite: write the datastore's Kubernetes objects under db_dir."""
    ds = datastore.load()
    if ds is None:
        return MIGRATOR_FAILED_RC
    for node in ds["nodes"]:
        path = os.path.join(db_dir, _node_file(node["name"]))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(node, f, indent=2, sort_keys=True)
            f.write("\n")
    path = os.path.join(db_dir, RESOURCES_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(ds["resources"], f, indent=2)
        f.write("\n")
    return 0


def load_objects(db_dir):
    """The (nodes, resources) of a backup directory; None when it is not one."""
    try:
        with open(os.path.join(db_dir, RESOURCES_FILE)) as f:
            resources = json.load(f)
        nodes = []
        minions = os.path.join(db_dir, "registry", "minions")
        for entry in sorted(os.listdir(minions)) if os.path.isdir(minions) else []:
            with open(os.path.join(minions, entry)) as f:
                nodes.append(json.load(f))
    except (OSError, ValueError):
        return None
    if not isinstance(resources, list) or not all(isinstance(r, str) for r in resources):
        return None
    if not all(isinstance(n, dict) and "name" in n for n in nodes):
        return None
    return nodes, resources


def restore_objects(db_dir):
    """migrator --mode restore-to-dqlite: the backup's objects, written through the datastore."""
    objects = load_objects(db_dir)
    if objects is None:
        return MIGRATOR_FAILED_RC
    nodes, resources = objects

    def mut(ds):
        ds["nodes"] = nodes
        ds["resources"] = resources

    mk.update_datastore(mut)
    return 0


# --------------------------------------------------------------------------- backup / restore


def backup(fname=None, debug=False):
    if not fname:
        fname = generate_backup_name()
    if fname.endswith(".tar.gz"):
        fname = fname[:-7]
    fname_tar = "{}.tar.gz".format(fname)
    with tempfile.TemporaryDirectory() as tmpdirname:
        db_dir = os.path.join(tmpdirname, os.path.basename(fname))
        os.makedirs(db_dir)
        rc = dump_objects(db_dir)
        if rc > 0:
            common.out("Backup process failed. {}".format(rc))
            return 1
        # Exceptions here (e.g. the directory of -o missing) escape as a traceback, exit 1.
        with tarfile.open(fname_tar, "w:gz") as tar:
            tar.add(db_dir, arcname=os.path.basename(db_dir))
        common.out("The backup is: {}".format(fname_tar))
    return 0


def _safe_extract(tar, path):
    """common/utils.py safe_extract: refuse members that would land outside `path`."""
    base = os.path.realpath(path)
    for member in tar.getmembers():
        target = os.path.realpath(os.path.join(path, member.name))
        if os.path.commonpath([base, target]) != base:
            raise Exception("Attempted Path Traversal in Tar File")
    if hasattr(tarfile, "data_filter"):
        tar.extractall(path, filter="data")
    else:
        tar.extractall(path)


def restore(fname_tar, debug=False):
    with tempfile.TemporaryDirectory() as tmpdirname:
        with tarfile.open(fname_tar, "r:gz") as tar:
            _safe_extract(tar, tmpdirname)
        fname = fname_tar[:-7] if fname_tar.endswith(".tar.gz") else fname_tar
        fname = os.path.basename(fname)
        rc = restore_objects(os.path.join(tmpdirname, fname))
        if rc > 0:
            common.out("Restore process failed. {}".format(rc))
            return 3
    return 0
