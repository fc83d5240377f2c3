"""
kos glue: pillar validation (the schema is _utils/kos_schema.py), this node's roles,
and the join information a control-plane node publishes through the mine.
"""

import json
import logging
import os

import salt.utils.files
import salt.utils.yaml
from salt.exceptions import CommandExecutionError

log = logging.getLogger(__name__)

__virtualname__ = "kos"

DEFAULT_STATE_DIR = "/etc/kos"


def __virtual__():
    return __virtualname__


def _formula_defaults():
    """Each formula's defaults.yaml, which its map merges the pillar over: rules across keys
    (an addon alias, ttl against min_remaining) judge what the formulas will see."""
    saltenv = __opts__.get("saltenv") or "base"
    defaults = {}
    for formula in __utils__["kos_schema.formulas"]():
        text = __salt__["cp.get_file_str"](f"salt://{formula}/defaults.yaml", saltenv=saltenv)
        defaults[formula] = salt.utils.yaml.safe_load(text) if text else {}
    return defaults


def check_pillar(pillar, defaults=None):
    """Return the list of problems in ``pillar`` (empty when it is valid)."""
    return __utils__["kos_schema.check"](pillar, defaults)


def pillar_errors():
    """
    Return this minion's pillar problems, one line per bad key naming the key and the
    fix; empty when the pillar is valid. The top file asks this before it reads any value.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.pillar_errors
    """
    pillar = __pillar__.value() if hasattr(__pillar__, "value") else dict(__pillar__)
    # A layer that does not render leaves the rest of the pillar incomplete: say that first.
    render_errors = pillar.get("_errors") or []
    if render_errors:
        return ["pillar did not render (fix the named SLS file): " + str(e) for e in render_errors]
    return check_pillar(pillar, _formula_defaults())


def validate_pillar():
    """
    Validate this minion's pillar before anything changes. Raises with one line per
    bad key (naming the key and the fix); returns True when the pillar is valid.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.validate_pillar
    """
    errors = pillar_errors()
    if errors:
        raise CommandExecutionError("invalid pillar:\n" + "\n".join(errors))
    return True


def pillar_schema():
    """
    Return the pillar schema: every key, its type, range and meaning (JSON Schema
    draft 4, declared with salt.utils.schema in _utils/kos_schema.py).

    CLI Example:

    .. code-block:: bash

        salt-call kos.pillar_schema --out=yaml
    """
    return __utils__["kos_schema.schema"]()


def roles():
    """
    Return this minion's roles in the deployment (salt_master, bastion,
    control_plane, worker, first_control_plane, kubernetes_node), as the pillar
    layer ``kos/derived.sls`` derived them from the Terraform layer.

    CLI Example:

    .. code-block:: bash

        salt '*' kos.roles
    """
    return list(__pillar__.get("kos", {}).get("roles", []))


def state_dir():
    return __salt__["config.get"]("kos:state_dir", DEFAULT_STATE_DIR)


def join_info(control_plane=False):
    """
    Return the join information this node published (mine function ``kos_join``,
    readable only by Kubernetes nodes): for microk8s the connection string and its
    expiry, for kubeadm the bootstrap token, CA hash and expiry. With
    ``control_plane`` (mine function ``kos_join_control_plane``, readable only by
    control-plane nodes) the kubeadm certificate key, which decrypts the cluster's
    CA keys. Empty when nothing is published.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos.join_info
    """
    name = "join-control-plane.json" if control_plane else "join.json"
    path = os.path.join(state_dir(), name)
    try:
        with salt.utils.files.fopen(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("kos: unreadable join file %s: %s", path, exc)
        return {}
