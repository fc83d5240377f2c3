"""
kos glue states.
"""

from salt.exceptions import CommandExecutionError

__virtualname__ = "kos"


def __virtual__():
    if "kos.validate_pillar" in __salt__:
        return __virtualname__
    return (False, "kos: the kos execution module is not available")


def pillar_valid(name):
    """
    Fail, naming every bad key, when this minion's pillar is invalid. Run it
    first with ``failhard: True`` so nothing changes on bad input.
    """
    ret = {"name": name, "result": True, "changes": {}, "comment": "pillar is valid"}
    try:
        __salt__["kos.validate_pillar"]()
    except CommandExecutionError as exc:
        ret["result"] = False
        ret["comment"] = str(exc)
    return ret
