"""
Converge the addons of a MicroK8s node: enabled with the arguments the pillar gives, or
disabled (https://microk8s.io/docs/addons).
"""

from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_state

__virtualname__ = "microk8s_addons"

ADDONS_RECORD = "microk8s-addons.json"


def __virtual__():
    # Loads without the microk8s command too: a test run on a node without the snap
    # predicts what it would do instead of failing as "state not found".
    return __virtualname__


def _addon(name, want, args=None, force=False, destroy_storage=False, record=None):
    ret = kos_state.ret(name)
    short = name.split("/", 1)[-1]
    args = [str(a) for a in (args or [])]
    verb = "enable" if want == "enabled" else "disable"
    if "microk8s_addons.addons" not in __salt__:
        return kos_state.missing_module_predicting(
            ret, __opts__, "microk8s", f"{verb} addon {short}", {short: {"old": None, "new": want}})
    record = record or kos_state.state_file(__salt__, ADDONS_RECORD)
    applied = kos_state.read_json(record) or {}
    try:
        current = __salt__["microk8s_addons.addons"]()
        if short not in current:
            return kos_state.fail(ret, f"addon {name} is not available on this node")
        # microk8s keeps no record of an addon's arguments: this state does
        again = want == "enabled" and current[short] == want and applied.get(short, args) != args
        if current[short] == want and not again:
            if want == "enabled" and short not in applied and not __opts__["test"]:
                kos_state.write_json(record, dict(applied, **{short: args}))
            ret["comment"] = f"addon {short} is already {want}"
            return ret
        if again:
            ret["changes"] = {short: {"old": {"args": applied[short]}, "new": {"args": args}}}
        else:
            ret["changes"] = {short: {"old": current[short], "new": want}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = (f"addon {short} would be enabled again with its new arguments"
                              if again else f"addon {short} would be {want}")
            return ret
        if again:
            # `enable` on an enabled addon only says so and changes nothing: disable first
            __salt__["microk8s_addons.disable_addon"](name)
        if want == "enabled":
            __salt__["microk8s_addons.enable_addon"](name, args=args)
        else:
            __salt__["microk8s_addons.disable_addon"](
                name, args=args, force=force, destroy_storage=destroy_storage
            )
        after = __salt__["microk8s_addons.addons"]().get(short)
        if after != want:
            return kos_state.fail(
                ret, f"microk8s {verb} {short} ran but the addon is {after}",
                made=ret["changes"])
        applied.pop(short, None)
        if want == "enabled":
            applied[short] = args
        kos_state.write_json(record, applied)
        ret["comment"] = (f"addon {short} enabled again with its new arguments" if again
                          else f"addon {short} {want}")
    except (OSError, CommandExecutionError) as exc:
        return kos_state.fail(ret, f"microk8s {verb} {name} failed: {exc}")
    return ret


def addon_enabled(name, args=None, record=None):
    """
    Ensure an addon is enabled with ``args``. An addon enabled earlier with other
    arguments (a new MetalLB range) is disabled and enabled again.

    args
        Arguments for the addon's enable script (e.g. a MetalLB range).

    record
        Where the arguments of the addons this state enabled are kept (default
        ``<kos:state_dir>/microk8s-addons.json``): microk8s itself does not keep them.
    """
    return _addon(name, "enabled", args=args, record=record)


def addon_disabled(name, args=None, force=False, destroy_storage=False, record=None):
    """
    Ensure an addon is disabled.

    force
        Needed to disable ``ha-cluster`` on a single node.

    destroy_storage
        ``hostpath-storage`` only: delete the volumes' data too.
    """
    return _addon(name, "disabled", args=args, force=force, destroy_storage=destroy_storage,
                  record=record)
