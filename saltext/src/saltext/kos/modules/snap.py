"""
Install snaps from a pinned channel through the ``snap`` command.

Salt 3008 ships no snap module; this covers what the formula needs (list,
install, refresh, hold, remove) with snapd's own messages and exit codes.

:depends: snapd
"""

import logging

from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_cli

log = logging.getLogger(__name__)

__virtualname__ = "snap"
__func_alias__ = {"list_": "list"}


def __virtual__():
    return kos_cli.virtual(__virtualname__, "snap", "snapd is not installed")


def _run(args, ok_retcodes=(0,)):
    return kos_cli.run(__salt__, ["snap", *args], ok_retcodes=ok_retcodes)


def list_(name=None):
    """
    Return installed snaps as ``{name: {"version", "rev", "tracking", "publisher", "notes"}}``.

    name
        Only this snap; an empty dict when it is not installed.

    CLI Example:

    .. code-block:: bash

        salt '*' snap.list microk8s
    """
    args = ["list"] + ([name] if name else [])
    res = _run(args, ok_retcodes=(0, 1))
    if res["retcode"] == 1:
        if "no matching snaps installed" in res["stderr"]:
            return {}
        raise CommandExecutionError(res["stderr"].strip())
    lines = res["stdout"].splitlines()
    ret = {}
    for line in lines[1:]:
        cols = line.split()
        if len(cols) < 6:
            continue
        ret[cols[0]] = {
            "version": cols[1],
            "rev": cols[2],
            "tracking": cols[3],
            "publisher": cols[4].rstrip("*✓"),
            "notes": cols[5],
        }
    return ret


def install(name, channel=None, classic=False):
    """
    Install a snap (``snap install NAME [--channel=C] [--classic]``).

    CLI Example:

    .. code-block:: bash

        salt '*' snap.install microk8s channel=1.31/stable classic=True
    """
    args = ["install", name]
    if channel is not None:
        args.append(f"--channel={channel}")
    if classic:
        args.append("--classic")
    return _run(args)["stdout"].strip()


def refresh(name, channel):
    """
    Move a snap to another channel (``snap refresh NAME --channel=C``).

    CLI Example:

    .. code-block:: bash

        salt '*' snap.refresh microk8s 1.32/stable
    """
    res = _run(["refresh", name, f"--channel={channel}"])
    return (res["stdout"] or res["stderr"]).strip()


def held(name):
    """
    Whether refreshes of snap ``name`` are held (snapd 2.58+ marks it ``held`` in the
    Notes of ``snap list``); False when it is not installed.

    CLI Example:

    .. code-block:: bash

        salt '*' snap.held microk8s
    """
    current = list_(name).get(name)
    return bool(current) and "held" in current["notes"].split(",")


def hold(name):
    """
    Hold general refreshes of snap ``name`` for ever (``snap refresh --hold NAME``):
    snapd no longer refreshes it on its own; an explicit ``snap refresh NAME`` still does.

    CLI Example:

    .. code-block:: bash

        salt '*' snap.hold microk8s
    """
    return _run(["refresh", "--hold", name])["stdout"].strip()


def unhold(name):
    """
    Let snapd refresh snap ``name`` on its own again (``snap refresh --unhold NAME``).

    CLI Example:

    .. code-block:: bash

        salt '*' snap.unhold microk8s
    """
    return _run(["refresh", "--unhold", name])["stdout"].strip()


def remove(name):
    """
    Remove a snap (``snap remove NAME``).

    CLI Example:

    .. code-block:: bash

        salt '*' snap.remove microk8s
    """
    return _run(["remove", name])["stdout"].strip()
