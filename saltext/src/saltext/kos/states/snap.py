"""
Keep a snap installed and tracking a pinned channel.
"""

from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_state

__virtualname__ = "snap"


def __virtual__():
    # Loads without snapd too: a test run on a bare node predicts the installation.
    return __virtualname__


def _channel(tracking):
    # snap list shortens nothing for two-part channels; "latest/stable" may show as "stable".
    return tracking if "/" in tracking else f"latest/{tracking}"


def installed(name, channel, classic=False, refresh=True):
    """
    Ensure snap ``name`` is installed and tracks ``channel``.

    name
        The snap.

    channel
        ``track/risk``, e.g. ``1.31/stable``. A different tracked channel is
        refreshed to this one, unless ``refresh`` is false.

    classic
        The snap needs classic confinement (microk8s does).

    refresh
        False: install from ``channel`` only where the snap is missing, and leave an
        installed snap on the channel it tracks (the comment says so): moving it is an
        upgrade, which another step runs with the care it needs.
    """
    ret = kos_state.ret(name)
    want = _channel(channel)
    if "snap.list" not in __salt__:
        return kos_state.missing_module_predicting(
            ret, __opts__, "snap", f"install {name} from {want}",
            {"channel": {"old": None, "new": want}})
    try:
        current = __salt__["snap.list"](name).get(name)
        if current and _channel(current["tracking"]) == want:
            ret["comment"] = f"{name} is installed from {want}"
            return ret
        old = _channel(current["tracking"]) if current else None
        if current and not refresh:
            ret["comment"] = (f"{name} tracks {old}, not {want}: left as it is (moving an "
                              "installed snap to another channel is an upgrade)")
            return ret
        ret["changes"] = {"channel": {"old": old, "new": want}}
        verb = "install" if current is None else "refresh"
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"{name} would {verb} from {want}"
            return ret
        if current is None:
            __salt__["snap.install"](name, channel=channel, classic=classic)
        else:
            __salt__["snap.refresh"](name, channel)
        after = __salt__["snap.list"](name).get(name)
        if not after or _channel(after["tracking"]) != want:
            return kos_state.fail(
                ret, f"{name} still does not track {want} after snap {verb}",
                made=ret["changes"])
        ret["comment"] = f"{name} {verb}ed from {want}"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, exc)
    return ret


def held(name):
    """
    Ensure snapd does not refresh snap ``name`` on its own (``snap refresh --hold``): its
    version moves only when the formula refreshes it. A snap that is not installed yet
    fails (order this after its installation).
    """
    ret = kos_state.ret(name)
    if "snap.list" not in __salt__:
        return kos_state.missing_module_predicting(
            ret, __opts__, "snap", f"hold refreshes of {name}",
            {"held": {"old": False, "new": True}})
    try:
        if not __salt__["snap.list"](name).get(name):
            if __opts__["test"]:
                ret["result"] = None
                ret["changes"] = {"held": {"old": False, "new": True}}
                ret["comment"] = f"refreshes of {name} would be held once it is installed"
                return ret
            return kos_state.fail(
                ret, f"cannot hold refreshes of {name}: it is not installed",
                made=ret["changes"])
        if __salt__["snap.held"](name):
            ret["comment"] = f"refreshes of {name} are held"
            return ret
        if kos_state.predicted(ret, __opts__, {"held": {"old": False, "new": True}},
                               f"refreshes of {name} would be held"):
            return ret
        __salt__["snap.hold"](name)
        if not __salt__["snap.held"](name):
            return kos_state.fail(
                ret, f"snap refresh --hold {name} ran but snap list does not show it held")
        ret["comment"] = f"refreshes of {name} held"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, exc)
    return ret


def removed(name):
    """
    Ensure snap ``name`` is not installed.
    """
    ret = kos_state.ret(name)
    if "snap.list" not in __salt__:
        ret["comment"] = f"snapd is not installed: {name} is not installed"
        return ret
    try:
        current = __salt__["snap.list"](name).get(name)
        if current is None:
            ret["comment"] = f"{name} is not installed"
            return ret
        if kos_state.predicted(
                ret, __opts__, {"installed": {"old": current["tracking"], "new": None}},
                f"{name} would be removed"):
            return ret
        __salt__["snap.remove"](name)
        ret["comment"] = f"{name} removed"
    except CommandExecutionError as exc:
        return kos_state.fail(ret, exc)
    return ret
