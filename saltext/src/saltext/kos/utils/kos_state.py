"""
What the kos state modules share: the return shape, failures, and the small files
they publish (written whole, readable by root only). Imported as plain Python
(``from saltext.kos.utils import kos_state``).
"""

import json
import os
import time

import salt.utils.files


def ret(name):
    """A state return that has nothing to do yet."""
    return {"name": name, "result": True, "changes": {}, "comment": ""}


def fail(ret, exc, made=None):
    """
    ``ret`` failed with ``exc``'s message. It reports ``made``, what the state changed
    before it failed (a ``kubeadm reset`` that ran), and nothing else: the changes it
    meant to make did not happen.
    """
    ret["result"] = False
    ret["changes"] = made or {}
    ret["comment"] = str(exc)
    return ret


def missing_module(ret, opts, module, what):
    """
    The execution module ``module`` did not load (its command is not installed yet):
    a test run predicts ``what``, a real run cannot do it.
    """
    ret["changes"] = {}
    if opts["test"]:
        ret["result"] = None
        ret["comment"] = f"would {what} once {module} is installed"
        return ret
    return fail(ret, f"cannot {what}: the {module} command is not installed")


def state_file(salt, name):
    """Where kos keeps its own note ``name`` on this node: ``<kos:state_dir>/<name>``."""
    return os.path.join(salt["config.get"]("kos:state_dir", "/etc/kos"), name)


def read_text(path):
    """The file's text, or None when it cannot be read."""
    try:
        with salt.utils.files.fopen(path) as fh:
            return fh.read()
    except OSError:
        return None


def read_json(path):
    """The JSON document at ``path``, or None when it is missing or unreadable."""
    text = read_text(path)
    try:
        return None if text is None else json.loads(text)
    except ValueError:
        return None


def write_file(path, text, mode=0o600):
    """
    Replace ``path`` with ``text`` at once (a reader never sees half a file), created
    with ``mode`` from the start; missing directories are made readable by root only.
    """
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    tmp = f"{path}.kos-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def write_json(path, doc, mode=0o600):
    write_file(path, json.dumps(doc), mode=mode)


def remove(path):
    """Remove ``path``; True when there was something to remove."""
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


# --- per-node join credentials --------------------------------------------------------------
# The first control plane keeps each credential it issued in <kos:state_dir>/join/<node>.json
# (root only) and publishes it in the mine under kos_join_<node>, readable by that node only.
JOIN_DIR = "join"


def credential_file(salt, node):
    """Where the first control plane keeps the join credential it issued for ``node``."""
    return state_file(salt, os.path.join(JOIN_DIR, f"{node}.json"))


def credential_nodes(salt):
    """The nodes that hold a join credential on this node (its credential files)."""
    try:
        names = os.listdir(state_file(salt, JOIN_DIR))
    except OSError:
        return []
    return sorted(n[: -len(".json")] for n in names if n.endswith(".json"))


def mine_key(node):
    """The mine entry under which ``node``'s join credential is published (to it alone)."""
    return f"kos_join_{node}"


def publish_credential(salt, node):
    """Publish ``node``'s credential file in the mine, readable by the minion ``node`` only."""
    ok = salt["mine.send"](mine_key(node), mine_function="kos.join_info", node=node,
                           allow_tgt=node, allow_tgt_type="list")
    if ok is False:
        raise OSError(f"mine.send {mine_key(node)} failed (see the minion log)")


def withdraw_credential(salt, node):
    """The mine entry of ``node``'s credential goes from the master."""
    salt["mine.delete"](mine_key(node))


def issued_credential(salt, source, me, role, mine_function, field, min_remaining):
    """
    The join credential ``source`` issued for this minion ``me`` as ``role``, read from the
    mine entry ``mine_function``: ``(info, None)``, or ``(None, problem)`` when it is
    missing (``field`` empty), issued for another node or role, or expires within
    ``min_remaining`` seconds (``expires`` None: it does not expire).
    """
    info = salt["mine.get"](source, mine_function).get(source) or {}
    if not info.get(field):
        return None, (f"{source} has issued no join credential for {me} ({mine_function}): "
                      "the orchestration issues it before the node's wave "
                      "(salt-run state.orchestrate orch.deploy)")
    if info.get("node") != me or info.get("role") != role:
        return None, (f"the credential {source} published is for {info.get('node')} as "
                      f"{info.get('role')}, not for {me} as {role}: not used")
    # a kubeadm token issued without a TTL says expires: None
    left = None if info.get("expires") is None else info["expires"] - time.time()
    if left is not None and left < min_remaining:
        return None, (f"the join credential {source} issued expires in {int(left)}s; "
                      "run the orchestration again to issue a new one")
    return info, None


def missing_module_predicting(ret, opts, module, what, changes):
    """``missing_module``, and a test run also shows ``changes``: what the state would
    change once ``module`` is installed (the snap and microk8s states predict it)."""
    ret = missing_module(ret, opts, module, what)
    if opts["test"]:
        ret["changes"] = changes
    return ret


def credential_problem(role, ttl, min_remaining):
    """Why a join credential cannot be issued for ``role`` with a lifetime of ``ttl``
    seconds, reused while ``min_remaining`` are left; None when it can."""
    if role not in ("worker", "control_plane"):
        return f"role must be worker or control_plane, not {role!r}"
    if int(ttl) <= int(min_remaining):
        return f"ttl ({ttl}) must be larger than min_remaining ({min_remaining})"
    return None


def predicted(ret, opts, changes, comment):
    """Note ``changes`` in ``ret``; in test mode also ``comment`` (what would happen) and
    return ``ret``, the prediction, else None, and the state goes on to make them."""
    ret["changes"] = changes
    if not opts["test"]:
        return None
    ret["result"] = None
    ret["comment"] = comment
    return ret
