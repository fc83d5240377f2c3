"""
The addons of a MicroK8s node: which are enabled, and ``microk8s enable|disable``
(https://microk8s.io/docs/addons).

:depends: the ``microk8s`` snap (``/snap/bin`` on PATH)
"""

from saltext.kos.utils import kos_microk8s

__virtualname__ = "microk8s_addons"


def __virtual__():
    return kos_microk8s.virtual(__virtualname__)


def addons():
    """
    Return ``{addon: "enabled"|"disabled"}`` for every addon the node knows, as
    ``microk8s.status`` reports them.

    CLI Example:

    .. code-block:: bash

        salt '*' microk8s_addons.addons
    """
    return {name: info["status"]
            for name, info in __salt__["microk8s.status"]()["addons"].items()}


def enable_addon(name, args=None):
    """
    Enable an addon (``microk8s enable NAME [ARGS...]``) and return its output.

    name
        Addon name, optionally qualified with its repository (``core/dns``).

    args
        List of arguments passed to the addon's enable script.

    CLI Example:

    .. code-block:: bash

        salt '*' microk8s_addons.enable_addon dns
        salt '*' microk8s_addons.enable_addon metallb args='["10.0.0.240-10.0.0.250"]'
    """
    cmd = ["enable", name, *[str(a) for a in (args or [])]]
    return kos_microk8s.change(__salt__, __context__, cmd)["stdout"]


def disable_addon(name, args=None, force=False, destroy_storage=False):
    """
    Disable an addon (``microk8s disable NAME [ARGS...]``) and return its output.

    name
        Addon name.

    args
        List of arguments passed to the addon's disable script.

    force
        Pass ``--force`` (needed to disable ``ha-cluster`` on a single node).

    destroy_storage
        For ``hostpath-storage``: also delete the volumes' data. Without it the
        addon's script asks on stdin, gets no answer and exits 1 after removing the
        provisioner; that exit is accepted here and the data is kept.

    CLI Example:

    .. code-block:: bash

        salt '*' microk8s_addons.disable_addon registry
    """
    target = name
    ok = (0,)
    if name in ("hostpath-storage", "core/hostpath-storage"):
        if destroy_storage:
            target = f"{name}:destroy-storage"
        else:
            ok = (0, 1)
    cmd = ["disable", target, *[str(a) for a in (args or [])]]
    if force:
        cmd.append("--force")
    return kos_microk8s.change(__salt__, __context__, cmd, ok_retcodes=ok, stdin="")["stdout"]
