"""
The kubeadm rolling upgrade (orch.upgrade), as
https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-upgrade/ describes it:
``kubeadm upgrade apply`` on the first control plane, ``kubeadm upgrade node`` on every
other node, and what a node must report before anything changes.

:depends: ``kubeadm`` on PATH
"""

import os
import re

import salt.utils.files
from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_cli, kos_kubeadm, kos_schema, kos_state

__virtualname__ = "kos_upgrade"

UPGRADE_NOTE = "kubeadm-upgrade-pending.json"
KUBERNETES_PACKAGES = ("kubeadm", "kubelet", "kubectl")
IMAGE_TAG_RE = re.compile(r"^\s*image:\s*\S+/kube-apiserver:(v[^\s\"']+)", re.M)


def __virtual__():
    return kos_cli.virtual(
        __virtualname__, "kubeadm", "are the packages installed?"
    )


def _run(args):
    """``kubeadm <args>`` with stdin closed: a prompt fails instead of hanging."""
    try:
        return kos_cli.run(
            __salt__, ["kubeadm", *args], stdin="", describe=kos_kubeadm.message)
    finally:
        # an upgrade moves the nodes' versions and the kubeadm caches
        for prefix in ("kubeadm", "kos_kubectl"):
            kos_cli.forget(__context__, prefix)


def manifest_version(kube_dir=None):
    """
    Return the version of this node's control-plane instance: the image tag of its
    kube-apiserver static Pod manifest (``v1.32.1``), what ``kubeadm upgrade apply`` and
    ``upgrade node`` move. None on a worker or a node kubeadm has not set up.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-*' kos_upgrade.manifest_version
    """
    path = os.path.join(kos_kubeadm.kube_dir(__salt__, kube_dir), "manifests",
                        "kube-apiserver.yaml")
    try:
        with salt.utils.files.fopen(path) as fh:
            found = IMAGE_TAG_RE.search(fh.read())
    except OSError:
        return None
    return found.group(1) if found else None


def upgrade_apply(version, dry_run=False):
    """
    Upgrade the cluster's control plane to ``version`` from the first control plane
    (``kubeadm upgrade apply <version> --yes``): its own static Pods, the stored
    ClusterConfiguration, and the addons once no other control plane is older. The kubeadm
    package must already be at ``version``; kubeadm's version policy refuses a skipped
    minor or a downgrade (``EnforceVersionPolicies`` in
    https://github.com/kubernetes/kubernetes/blob/v1.32.1/cmd/kubeadm/app/phases/upgrade/policy.go).

    version
        ``v1.32.1``.

    dry_run
        ``--dry-run``: print what would change, change nothing.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_upgrade.upgrade_apply v1.32.1
    """
    args = ["upgrade", "apply", str(version), "--yes"] + (["--dry-run"] if dry_run else [])
    return _run(args)["stdout"]


def upgrade_node(dry_run=False):
    """
    Upgrade this node to the version the cluster stores (``kubeadm upgrade node``): a
    control plane's static Pods and kubeconfigs, every node's kubelet configuration. Run
    after ``upgrade_apply`` on the first control plane, with the new kubeadm package.

    dry_run
        ``--dry-run``: print what would change, change nothing.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-worker-*' kos_upgrade.upgrade_node
    """
    args = ["upgrade", "node"] + (["--dry-run"] if dry_run else [])
    return _run(args)["stdout"]


def package_versions():
    """
    Return the installed versions of the Kubernetes packages, as the system's package
    manager reports them: ``{"kubeadm": "1.32.1-1.1", "kubelet": ..., "kubectl": ...}``
    (None: not installed, or no package manager Salt knows).

    CLI Example:

    .. code-block:: bash

        salt '*' kos_upgrade.package_versions
    """
    if "pkg.version" not in __salt__:
        return dict.fromkeys(KUBERNETES_PACKAGES)
    found = __salt__["pkg.version"](*KUBERNETES_PACKAGES)
    return {name: found.get(name) or None for name in KUBERNETES_PACKAGES}


def upgrade_facts(kube_dir=None):
    """
    What orch.upgrade must know of this node before it changes anything:
    ``{"joined": kubeadm set the node up (see has_local_files), "kubeadm": the kubeadm
    command's version, "control_plane": the node runs a control-plane instance,
    "control_plane_version": its version (manifest_version), "packages": package_versions,
    "pillar": {"version", "package_version", "repo", "images"} of kubeadm in a freshly
    compiled pillar,
    "pending": the version of an upgrade that started here and has not finished,
    "pending_cordoned": whether the node was cordoned before that upgrade drained it}``.

    CLI Example:

    .. code-block:: bash

        salt '*' kos_upgrade.upgrade_facts
    """
    # Salt 3008 masks pillar values it returns unless asked; these three are not secret.
    pillar = __salt__["pillar.items"](unmask=True).get("kubeadm") or {}
    note = kos_state.read_json(
        kos_state.state_file(__salt__, UPGRADE_NOTE)) or {}
    try:
        kubeadm_version = __salt__["kubeadm.version"]()
    except CommandExecutionError:
        kubeadm_version = None
    control_plane = manifest_version(kube_dir)
    return {
        "joined": __salt__["kubeadm.has_local_files"](kube_dir),
        "kubeadm": kubeadm_version,
        "control_plane": control_plane is not None,
        "control_plane_version": control_plane,
        "packages": package_versions(),
        "pillar": kos_schema.plain(
            {key: pillar.get(key) for key in ("version", "package_version", "repo", "images")}),
        "pending": note.get("version"),
        "pending_cordoned": bool(note.get("cordoned")),
    }
