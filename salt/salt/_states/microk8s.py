"""
Converge MicroK8s nodes: running services, addons, extra certificate SANs, the
published join token and cluster membership.

Join tokens never appear in a state's changes or comment.
"""

import json
import os
import re
import time

import salt.utils.files
from salt.exceptions import CommandExecutionError

__virtualname__ = "microk8s"

SAN_MARKER = "#MOREIPS"
# SAN ids from here on belong to this state; lower ids are the snap's own or the operator's.
MANAGED_SAN_ID = 100


def __virtual__():
    if "microk8s.status" in __salt__:
        return __virtualname__
    return (False, "microk8s: the microk8s execution module is not available")


def _ret(name):
    return {"name": name, "result": True, "changes": {}, "comment": ""}


def _fail(ret, exc):
    ret["result"] = False
    ret["changes"] = {}
    ret["comment"] = str(exc)
    return ret


def running(name, timeout=120):
    """
    Ensure the node's services run and the node is ready.

    timeout
        Seconds to wait for the node to become ready.
    """
    ret = _ret(name)
    try:
        st = __salt__["microk8s.status"]()
        if st["worker"] or st["running"]:
            ret["comment"] = "microk8s is running"
            return ret
        ret["changes"] = {"running": {"old": False, "new": True}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = "microk8s would be started"
            return ret
        if st["stopped"]:
            __salt__["microk8s.start"]()
        st = __salt__["microk8s.status"](wait_ready=True, timeout=timeout)
        if not st["running"]:
            ret["result"] = False
            ret["comment"] = st["message"] or f"microk8s is not ready after {timeout}s"
            return ret
        ret["comment"] = "microk8s started"
    except CommandExecutionError as exc:
        return _fail(ret, exc)
    return ret


def _addon(name, want, args=None, force=False, destroy_storage=False):
    ret = _ret(name)
    verb = "enable" if want == "enabled" else "disable"
    try:
        current = __salt__["microk8s.addons"]()
        short = name.split("/", 1)[-1]
        if short not in current:
            return _fail(ret, f"addon {name} is not available on this node")
        if current[short] == want:
            ret["comment"] = f"addon {short} is already {want}"
            return ret
        ret["changes"] = {short: {"old": current[short], "new": want}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"addon {short} would be {want}"
            return ret
        if want == "enabled":
            __salt__["microk8s.enable_addon"](name, args=args)
        else:
            __salt__["microk8s.disable_addon"](
                name, args=args, force=force, destroy_storage=destroy_storage
            )
        after = __salt__["microk8s.addons"]().get(short)
        if after != want:
            ret["result"] = False
            ret["comment"] = f"microk8s {verb} {short} ran but the addon is {after}"
            return ret
        ret["comment"] = f"addon {short} {want}"
    except CommandExecutionError as exc:
        return _fail(ret, f"microk8s {verb} {name} failed: {exc}")
    return ret


def addon_enabled(name, args=None):
    """
    Ensure an addon is enabled.

    args
        Arguments for the addon's enable script (e.g. a MetalLB range).
    """
    return _addon(name, "enabled", args=args)


def addon_disabled(name, args=None, force=False, destroy_storage=False):
    """
    Ensure an addon is disabled.

    force
        Needed to disable ``ha-cluster`` on a single node.

    destroy_storage
        ``hostpath-storage`` only: delete the volumes' data too.
    """
    return _addon(name, "disabled", args=args, force=force, destroy_storage=destroy_storage)


def _read(path):
    with salt.utils.files.fopen(path) as fh:
        return fh.read()


def _write(path, text, mode=0o600):
    tmp = f"{path}.kos-tmp"
    with salt.utils.files.fopen(tmp, "w") as fh:
        fh.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _render_sans(template, sans):
    """Return the template with our SAN lines (ids >= MANAGED_SAN_ID) set to ``sans``."""
    kept = [
        line
        for line in template.splitlines()
        if not (
            (m := re.match(r"^(IP|DNS)\.(\d+)\s*=", line)) and int(m.group(2)) >= MANAGED_SAN_ID
        )
    ]
    ours = []
    counters = {"IP": MANAGED_SAN_ID, "DNS": MANAGED_SAN_ID}
    for san in sans:
        kind = "IP" if re.fullmatch(r"[0-9.]+|[0-9a-fA-F:]+", san) else "DNS"
        ours.append(f"{kind}.{counters[kind]} = {san}")
        counters[kind] += 1
    out = []
    for line in kept:
        if line.strip() == SAN_MARKER:
            out.extend(ours)
        out.append(line)
    return "\n".join(out) + "\n"


def _current_sans(template):
    return [
        m.group(3)
        for line in template.splitlines()
        if (m := re.match(r"^(IP|DNS)\.(\d+)\s*=\s*(\S+)", line))
        and int(m.group(2)) >= MANAGED_SAN_ID
    ]


def extra_sans(name, sans, snap_data=None):
    """
    Ensure the API server certificate carries ``sans`` (IP addresses or DNS names,
    e.g. a floating IP): they are written into ``csr.conf.template`` above the
    ``#MOREIPS`` marker, then ``microk8s refresh-certs --cert server.crt`` re-renders
    the template and regenerates the certificate. Clustered nodes do not pick up
    template edits on their own, hence the explicit refresh.

    sans
        The complete list this state manages; entries it added earlier and that
        are no longer listed are removed.

    snap_data
        The snap's data directory (default ``/var/snap/microk8s/current``).
    """
    ret = _ret(name)
    snap_data = snap_data or __salt__["config.get"](
        "microk8s:snap_data", "/var/snap/microk8s/current"
    )
    path = os.path.join(snap_data, "certs", "csr.conf.template")
    sans = [str(s) for s in (sans or [])]
    try:
        template = _read(path)
    except OSError as exc:
        return _fail(ret, f"cannot read {path}: {exc}")
    if SAN_MARKER not in template:
        return _fail(ret, f"{path} has no {SAN_MARKER} line: cannot place extra SANs")
    old = _current_sans(template)
    if old == sans:
        ret["comment"] = "the API server certificate has the extra SANs"
        return ret
    ret["changes"] = {"sans": {"old": old, "new": sans}}
    if __opts__["test"]:
        ret["result"] = None
        ret["comment"] = "csr.conf.template would be updated and server.crt regenerated"
        return ret
    try:
        _write(path, _render_sans(template, sans), mode=os.stat(path).st_mode & 0o777)
        __salt__["microk8s.refresh_certs"]("server.crt")
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"updating the certificate SANs failed: {exc}")
    ret["comment"] = "extra SANs written and server.crt regenerated"
    return ret


def _published(path):
    try:
        return json.loads(_read(path))
    except (OSError, ValueError):
        return None


def join_token_published(name, ttl=7200, min_remaining=1800, cidr=None, snap_data=None):
    """
    Ensure a join token with TTL is published for other nodes at ``name`` (a JSON
    file readable by root only; the ``kos.join_info`` mine function serves it to
    Kubernetes nodes only).

    A published token is reused while it has at least ``min_remaining`` seconds
    left, is still known to the cluster agent, and its certificate check still
    matches the server certificate; otherwise a new one is issued. Tokens without
    TTL are never published: the first join attempt burns them, even one that fails.

    ttl
        Lifetime of a new token, in seconds.

    min_remaining
        Re-issue when less than this is left: joins in the next wave must not
        race the expiry.

    cidr
        Publish the connection string whose address is in this network
        (the private network); default: the node's default address.
    """
    ret = _ret(name)
    if int(ttl) <= int(min_remaining):
        return _fail(ret, f"ttl ({ttl}) must be larger than min_remaining ({min_remaining})")
    now = time.time()
    current = _published(name)
    reasons = []
    try:
        check = __salt__["microk8s.cert_check"](snap_data)
        if current is None:
            reasons.append("no token published")
        else:
            token = current.get("connection", "").split("/")[1:2]
            if current.get("expires", 0) - now < int(min_remaining):
                reasons.append("the published token is near expiry")
            elif not token or not __salt__["microk8s.token_valid"](token[0], snap_data):
                reasons.append("the cluster agent no longer knows the published token")
            elif current.get("check") != check:
                reasons.append("the server certificate changed")
        if not reasons:
            left = int(current["expires"] - now)
            ret["comment"] = f"join token published, valid for {left}s more"
            return ret
        old = None if current is None else {"expires": current.get("expires")}
        ret["changes"] = {"token": {"old": old, "new": {"ttl": int(ttl)}}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"a new join token would be issued ({reasons[0]})"
            return ret
        issued = __salt__["microk8s.add_node"](ttl=int(ttl))
        urls = issued["urls"]
        chosen = urls[0]
        if cidr:
            for url in urls:
                if __salt__["network.ip_in_subnet"](url.split(":", 1)[0], cidr):
                    chosen = url
                    break
            else:
                return _fail(ret, f"add-node offered no address in {cidr}: {len(urls)} URLs")
        doc = {
            "distribution": "microk8s",
            "connection": chosen,
            "check": chosen.rsplit("/", 1)[-1],
            "issued": int(now),
            "expires": issued["expires"],
        }
        os.makedirs(os.path.dirname(name), mode=0o700, exist_ok=True)
        _write(name, json.dumps(doc), mode=0o600)
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"issuing a join token failed: {exc}")
    ret["changes"]["token"]["new"]["expires"] = doc["expires"]
    ret["comment"] = f"new join token published ({reasons[0]})"
    return ret


def _in_cluster(status):
    """A worker that joined, or a control plane whose datastore has other members."""
    return bool(status["worker"]) or len(status["high_availability"]["nodes"]) > 1


def cluster_joined(name, source, role="worker", mine_function="kos_join", min_remaining=60):
    """
    Ensure this node is part of the cluster whose first control-plane node is
    ``source``. The connection string comes from the mine (published there by
    ``join_token_published`` on ``source``), so it never passes through rendered SLS.

    A node already in a cluster does nothing. A failed join reports the CLI's
    message (e.g. ``Connection failed. Invalid token (500).``).

    source
        Minion id of the node that published the token.

    role
        ``worker`` or ``control_plane``.

    min_remaining
        Refuse a published token with less than this many seconds left.
    """
    ret = _ret(name)
    if role not in ("worker", "control_plane"):
        return _fail(ret, f"role must be worker or control_plane, not {role!r}")
    try:
        if _in_cluster(__salt__["microk8s.status"]()):
            ret["comment"] = "already part of a cluster"
            return ret
        ret["changes"] = {"cluster": {"old": "standalone", "new": f"joined {source} as {role}"}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"would join the cluster of {source} as {role}"
            return ret
        info = __salt__["mine.get"](source, mine_function).get(source) or {}
        if not info.get("connection"):
            return _fail(ret, f"{source} has published no join token in the mine ({mine_function})")
        left = (info.get("expires") or 0) - time.time()
        if left < min_remaining:
            return _fail(
                ret,
                f"the join token published by {source} expires in {int(left)}s; "
                f"re-apply microk8s.master on {source} to issue a new one",
            )
        out = __salt__["microk8s.join"](info["connection"], worker=(role == "worker"))
        if not _in_cluster(__salt__["microk8s.status"]()):
            ret["result"] = False
            ret["comment"] = f"microk8s join reported success but the node is alone: {out}"
            return ret
        ret["comment"] = f"joined the cluster of {source} as {role}"
    except CommandExecutionError as exc:
        return _fail(ret, f"microk8s join failed: {exc}")
    return ret
