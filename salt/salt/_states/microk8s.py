"""
Converge MicroK8s nodes: running services, addons, extra certificate SANs, the
published join token and cluster membership.

Join tokens never appear in a state's changes or comment.
"""

import ipaddress
import os
import re
import secrets
import time

from salt.exceptions import CommandExecutionError

__virtualname__ = "microk8s"

SAN_MARKER = "#MOREIPS"
# SAN ids from here on belong to this state; lower ids are the snap's own or the operator's.
MANAGED_SAN_ID = 100
ADDONS_RECORD = "microk8s-addons.json"


def __virtual__():
    # Loads without the microk8s command too: a test run on a node without the snap
    # predicts what it would do instead of failing as "state not found".
    return __virtualname__


def _ret(name):
    return __utils__["kos_state.ret"](name)


def _fail(ret, exc):
    return __utils__["kos_state.fail"](ret, exc)


def _installed():
    return "microk8s.status" in __salt__


def _missing(ret, what, changes):
    """Nothing to ask on a node without the snap: test mode predicts ``changes``."""
    ret = __utils__["kos_state.missing_module"](ret, __opts__, "microk8s", what)
    if __opts__["test"]:
        ret["changes"] = changes
    return ret


def _snap_data(snap_data=None):
    return snap_data or __salt__["config.get"]("microk8s:snap_data", "/var/snap/microk8s/current")


def running(name, timeout=120):
    """
    Ensure the node's services run and the node is ready.

    timeout
        Seconds to wait for the node to become ready.
    """
    ret = _ret(name)
    if not _installed():
        return _missing(ret, "start microk8s", {"running": {"old": False, "new": True}})
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


def _addon(name, want, args=None, force=False, destroy_storage=False, record=None):
    ret = _ret(name)
    short = name.split("/", 1)[-1]
    args = [str(a) for a in (args or [])]
    verb = "enable" if want == "enabled" else "disable"
    if not _installed():
        return _missing(ret, f"{verb} addon {short}", {short: {"old": None, "new": want}})
    record = record or __utils__["kos_state.state_file"](__salt__, ADDONS_RECORD)
    applied = __utils__["kos_state.read_json"](record) or {}
    try:
        current = __salt__["microk8s.addons"]()
        if short not in current:
            return _fail(ret, f"addon {name} is not available on this node")
        # microk8s keeps no record of an addon's arguments: this state does
        again = want == "enabled" and current[short] == want and applied.get(short, args) != args
        if current[short] == want and not again:
            if want == "enabled" and short not in applied and not __opts__["test"]:
                __utils__["kos_state.write_json"](record, dict(applied, **{short: args}))
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
            # `enable` on an enabled addon only says so (reference A.5): disable first
            __salt__["microk8s.disable_addon"](name)
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
        applied.pop(short, None)
        if want == "enabled":
            applied[short] = args
        __utils__["kos_state.write_json"](record, applied)
        ret["comment"] = (f"addon {short} enabled again with its new arguments" if again
                          else f"addon {short} {want}")
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"microk8s {verb} {name} failed: {exc}")
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


def _san_kind(san):
    """``IP`` for an address (v4 or v6), ``DNS`` for anything else ("cafe" is a name)."""
    try:
        ipaddress.ip_address(san)
        return "IP"
    except ValueError:
        return "DNS"


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
        kind = _san_kind(san)
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


def _missing_from(cert, sans):
    """The SANs in ``sans`` that certificate SANs ``cert`` (``microk8s.server_sans``) lack."""
    ips = {ipaddress.ip_address(ip) for ip in cert["ip"]}
    names = set(cert["dns"])
    return [
        san for san in sans
        if (ipaddress.ip_address(san) not in ips if _san_kind(san) == "IP"
            else san.lower() not in names)
    ]


def extra_sans(name, sans, snap_data=None):
    """
    Ensure the API server certificate carries ``sans`` (IP addresses or DNS names,
    e.g. a floating IP). Done means ``server.crt`` carries them, whatever the
    template says: they are written into ``csr.conf.template`` above the ``#MOREIPS``
    marker, then ``microk8s refresh-certs --cert server.crt`` re-renders the template
    and regenerates the certificate (clustered nodes do not pick up template edits on
    their own). A failed refresh fails the state with the CLI's message and puts the
    template back, so the next run tries again.

    sans
        The complete list this state manages; entries it added earlier and that
        are no longer listed are removed.

    snap_data
        The snap's data directory (default ``/var/snap/microk8s/current``).
    """
    ret = _ret(name)
    sans = [str(s) for s in (sans or [])]
    if not _installed():
        return _missing(ret, "put the extra SANs into the API server certificate",
                        {"sans": {"old": None, "new": sans}})
    path = os.path.join(_snap_data(snap_data), "certs", "csr.conf.template")
    template = __utils__["kos_state.read_text"](path)
    if template is None:
        return _fail(ret, f"cannot read {path}")
    if SAN_MARKER not in template:
        return _fail(ret, f"{path} has no {SAN_MARKER} line: cannot place extra SANs")
    old = _current_sans(template)
    try:
        lacking = _missing_from(__salt__["microk8s.server_sans"](snap_data), sans)
    except CommandExecutionError as exc:
        return _fail(ret, exc)
    if old == sans and not lacking:
        ret["comment"] = "the API server certificate has the extra SANs"
        return ret
    ret["changes"] = {"sans": {"old": old, "new": sans}}
    if lacking:
        ret["changes"]["certificate"] = {"old": {"lacks": lacking}, "new": {"lacks": []}}
    if __opts__["test"]:
        ret["result"] = None
        ret["comment"] = "csr.conf.template would be updated and server.crt regenerated"
        return ret
    mode = os.stat(path).st_mode & 0o777
    try:
        __utils__["kos_state.write_file"](path, _render_sans(template, sans), mode=mode)
        __salt__["microk8s.refresh_certs"]("server.crt")
        lacking = _missing_from(__salt__["microk8s.server_sans"](snap_data), sans)
        if lacking:
            raise CommandExecutionError(
                f"refresh-certs ran but server.crt lacks {', '.join(lacking)}")
    except (OSError, CommandExecutionError) as exc:
        try:
            __utils__["kos_state.write_file"](path, template, mode=mode)
        except OSError:
            pass
        return _fail(ret, f"updating the certificate SANs failed: {exc}")
    ret["comment"] = "extra SANs written and server.crt regenerated"
    return ret


def _published(path):
    return __utils__["kos_state.read_json"](path)


def join_token_published(name, ttl=7200, min_remaining=1800, cidr=None, snap_data=None):
    """
    Ensure a join token with TTL is published for other nodes at ``name`` (a JSON
    file readable by root only; the ``kos.join_info`` mine function serves it to
    Kubernetes nodes only).

    A published token is reused while it has at least ``min_remaining`` seconds
    left, is still known to the cluster agent, and its certificate check still
    matches the server certificate; otherwise a new one is issued. Tokens without
    TTL are never published: the first join attempt burns them, even one that fails.
    A token that cannot be published is withdrawn again.

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
    if not _installed():
        return _missing(ret, "issue a join token", {"token": {"old": None, "new": {"ttl": int(ttl)}}})
    now = time.time()
    current = _published(name)
    reasons = []
    issued = None
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
        if cidr and not __salt__["network.ip_addrs"](cidr=cidr, include_loopback=True):
            return _fail(ret, f"this node has no address in {cidr}: no token issued")
        # our own token (as Canonical's charm does): known before add-node, so it can
        # be withdrawn whatever fails after
        issued = secrets.token_hex(16)
        urls = __salt__["microk8s.add_node"](ttl=int(ttl), token=issued)["urls"]
        chosen = urls[0]
        if cidr:
            chosen = next((u for u in urls
                           if __salt__["network.ip_in_subnet"](u.split(":", 1)[0], cidr)), None)
            if chosen is None:
                raise CommandExecutionError(f"add-node offered no address in {cidr}: "
                                            f"{len(urls)} URLs")
        doc = {
            "distribution": "microk8s",
            "connection": chosen,
            "check": chosen.rsplit("/", 1)[-1],
            "issued": int(now),
            "expires": int(now + int(ttl)),
        }
        __utils__["kos_state.write_json"](name, doc)
    except (OSError, CommandExecutionError) as exc:
        if issued is not None:
            try:
                __salt__["microk8s.remove_token"](issued, snap_data)
            except CommandExecutionError:
                pass
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
    changes = {"cluster": {"old": "standalone", "new": f"joined {source} as {role}"}}
    if not _installed():
        return _missing(ret, f"join the cluster of {source} as {role}", changes)
    try:
        if _in_cluster(__salt__["microk8s.status"]()):
            ret["comment"] = "already part of a cluster"
            return ret
        ret["changes"] = changes
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


def cluster_left(name):
    """
    Ensure this node is in no cluster (``microk8s leave``): the way back before the
    snap is removed. A node without the snap, or alone, has nothing to leave.
    """
    ret = _ret(name)
    if not _installed():
        ret["comment"] = "microk8s is not installed: no cluster to leave"
        return ret
    try:
        if not _in_cluster(__salt__["microk8s.status"]()):
            ret["comment"] = "not part of a cluster"
            return ret
        ret["changes"] = {"cluster": {"old": "member", "new": "standalone"}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = "would leave the cluster"
            return ret
        __salt__["microk8s.leave"]()
        if _in_cluster(__salt__["microk8s.status"]()):
            return _fail(ret, "microk8s leave ran but the node is still in a cluster")
        ret["comment"] = "left the cluster"
    except CommandExecutionError as exc:
        return _fail(ret, f"microk8s leave failed: {exc}")
    return ret
