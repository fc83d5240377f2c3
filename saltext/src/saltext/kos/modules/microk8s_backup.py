"""
Backups of a MicroK8s cluster's datastore: ``microk8s dbctl backup`` and ``restore``
(https://microk8s.io/docs/backup-restore). ``kos.backup`` and ``kos.restore_dqlite`` seal,
ship and open the archives.

:depends: the ``microk8s`` snap (``/snap/bin`` on PATH)
"""

import os

from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_backup, kos_cli, kos_microk8s

__virtualname__ = "microk8s_backup"

# A `dbctl backup` archive at or below this size holds no datastore: 1.27+ sometimes writes
# ~200-byte archives of an empty directory (https://github.com/canonical/microk8s/issues/4259).
MIN_BACKUP_BYTES = 512


def __virtual__():
    return kos_microk8s.virtual(__virtualname__)


def _dbctl_message(res):
    """The CLI's words: a failing restore or backup can end in a Python traceback; of that
    only its last line, the exception, is kept."""
    stderr = (res.get("stderr") or "").strip()
    if stderr.startswith("Traceback (most recent call last):"):
        stderr = stderr.splitlines()[-1].strip()
    return kos_cli.message(dict(res, stderr=stderr))


def backup(directory):
    """
    Back up the Kubernetes objects of the cluster's datastore (``microk8s dbctl backup
    -o <directory>/microk8s-<host>-<UTC time>.tar.gz``) on this control plane and return
    ``{"path", "name" (the file name without .tar.gz, also the directory inside the
    archive), "key_file" (the cluster CA key that seals it, which only control planes
    hold), "size", "revision", "keys", "hash"}``; the last three are etcd facts, always
    None here, kept so callers treat both distributions alike.

    The archive is written with mode 0600 (``directory`` is created 0700). An archive of
    only a few hundred bytes holds no datastore (an empty directory, as 1.27+ sometimes
    writes): it is removed and refused.

    directory
        Where the archive goes.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' microk8s_backup.backup /var/lib/kos/backups
    """
    directory = os.path.abspath(directory)
    host = __grains__["host"]
    name = f"microk8s-{host}-{kos_backup.stamp()}"
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, name + ".tar.gz")
    old = os.umask(0o077)
    try:
        kos_microk8s.run(__salt__, ["dbctl", "backup", "-o", path], describe=_dbctl_message)
    finally:
        os.umask(old)
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise CommandExecutionError(
            f"microk8s dbctl backup reported success but wrote no {path}"
        ) from exc
    if size <= MIN_BACKUP_BYTES:
        os.unlink(path)
        raise CommandExecutionError(
            f"microk8s dbctl backup wrote an empty archive ({size} bytes, removed): the "
            "datastore was not exported (a known dbctl problem on 1.27+, "
            "canonical/microk8s#4259); check that k8s-dqlite runs and try again"
        )
    return {
        "path": path,
        "name": name,
        "key_file": os.path.join(kos_microk8s.snap_data(__salt__), "certs", "ca.key"),
        "size": size,
        "revision": None,
        "keys": None,
        "hash": None,
    }


def restore_from(path):
    """
    Write the Kubernetes objects of a ``dbctl backup`` archive back into the running
    datastore (``microk8s dbctl restore PATH``). Run it on one control plane: dqlite
    replicates it to the others. Only objects come back: not certificates, service
    arguments, addon state files or volume data. Raises with the CLI's words (``Please
    ensure the kubernetes apiserver is running and HA is enabled.``, ``Restore process
    failed. N``, or the exception of an unreadable archive).

    path
        The ``.tar.gz`` archive; the directory inside must carry its base name.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' microk8s_backup.restore_from /tmp/microk8s-k8s-cp-1-20261127T180000Z.tar.gz
    """
    kos_microk8s.change(__salt__, __context__, ["dbctl", "restore", path],
                        describe=_dbctl_message)
    return True
