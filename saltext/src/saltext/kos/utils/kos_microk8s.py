"""
What the execution modules of a MicroK8s node share (``microk8s``, ``microk8s_addons``,
``microk8s_certs``, ``microk8s_backup``): loading only where the snap is, one way to run
the ``microk8s`` command, the ``__context__`` cache every change drops, where the snap
keeps its data, and what the CLI prints on a node that joined as a worker. Imported as
plain Python; the callers hand in their ``__salt__`` and ``__context__``.
"""

from saltext.kos.utils import kos_cli

DEFAULT_SNAP_DATA = "/var/snap/microk8s/current"
# Printed (exit 0) by several sub-commands on a node that joined as a worker.
WORKER_MESSAGE = "This MicroK8s deployment is acting as a node in a cluster."
# The prefix of the __context__ entries the microk8s modules keep (``microk8s.status``).
CACHE = "microk8s"


def virtual(name):
    """``__virtual__`` of a module that runs the ``microk8s`` command."""
    return kos_cli.virtual(name, "microk8s", "is the snap installed?")


def snap_data(salt, directory=None):
    """``directory`` when given, else the ``microk8s:snap_data`` setting, else the snap's."""
    return directory or salt["config.get"]("microk8s:snap_data", DEFAULT_SNAP_DATA)


def run(salt, args, secret=False, ok_retcodes=(0,), stdin=None, describe=kos_cli.message):
    """Run ``microk8s <args>``; ``secret`` keeps tokens and kubeconfigs out of the log;
    ``describe(result)`` words a failure (default: the CLI's stderr and stdout)."""
    return kos_cli.run(salt, ["microk8s", *args], secret=secret, ok_retcodes=ok_retcodes,
                       stdin=stdin, describe=describe)


def change(salt, context, args, **kwargs):
    """``run`` a command that changes the node; what is cached about it goes either way,
    since a failed command may have changed it too."""
    try:
        return run(salt, args, **kwargs)
    finally:
        kos_cli.forget(context, CACHE)
