"""
Converge MicroK8s nodes: running services, addons, extra certificate SANs, the join
credential each joining node gets for itself, and cluster membership.

Join tokens never appear in a state's changes or comment.
"""

import ipaddress
import os
import re
import secrets
import time

from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_state

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
    return kos_state.ret(name)


def _fail(ret, exc):
    return kos_state.fail(ret, exc)


def _installed():
    return "microk8s.status" in __salt__


def _missing(ret, what, changes):
    """Nothing to ask on a node without the snap: test mode predicts ``changes``."""
    ret = kos_state.missing_module(ret, __opts__, "microk8s", what)
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
    record = record or kos_state.state_file(__salt__, ADDONS_RECORD)
    applied = kos_state.read_json(record) or {}
    try:
        current = __salt__["microk8s.addons"]()
        if short not in current:
            return _fail(ret, f"addon {name} is not available on this node")
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
            # `enable` on an enabled addon only says it is enabled and changes nothing: disable first
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
        kos_state.write_json(record, applied)
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
    template = kos_state.read_text(path)
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
        kos_state.write_file(path, _render_sans(template, sans), mode=mode)
        __salt__["microk8s.refresh_certs"]("server.crt")
        lacking = _missing_from(__salt__["microk8s.server_sans"](snap_data), sans)
        if lacking:
            raise CommandExecutionError(
                f"refresh-certs ran but server.crt lacks {', '.join(lacking)}")
    except (OSError, CommandExecutionError) as exc:
        try:
            kos_state.write_file(path, template, mode=mode)
        except OSError:
            pass
        return _fail(ret, f"updating the certificate SANs failed: {exc}")
    ret["comment"] = "extra SANs written and server.crt regenerated"
    return ret


def _published(path):
    return kos_state.read_json(path)


def _credential_left(doc, now, min_remaining, check, snap_data):
    """Why the issued credential ``doc`` cannot serve a join any more, or None."""
    if doc is None:
        return "no credential issued"
    token = doc.get("connection", "").split("/")[1:2]
    if doc.get("expires", 0) - now < int(min_remaining):
        return "the issued credential is near expiry"
    if not token or not __salt__["microk8s.token_valid"](token[0], snap_data):
        return "the cluster agent no longer knows the issued credential"
    if doc.get("check") != check:
        return "the server certificate changed"
    return None


def join_credential_present(name, role, ttl=900, min_remaining=300, cidr=None, snap_data=None):
    """
    Ensure the node ``name`` (a minion id) holds a join credential of its own, issued on
    this first control plane and published in the mine under ``kos_join_<name>``, which
    only the minion ``name`` can read. The credential names the node and its ``role``: the
    joining state refuses one issued for another role, and joins a worker with
    ``--worker``.

    The credential is an ``add-node`` token with a TTL, never a single-use one: the
    cluster agent burns a single-use token at the first join attempt, even one that then
    fails, while a TTL token survives it, so a failed join can be
    tried again. It is used once all the same: the orchestration revokes it
    (``join_credentials_absent``) as soon as the node joined, and when its wave ends.

    An issued credential is reused while it has ``min_remaining`` seconds left, the
    cluster agent still knows its token and the server certificate is unchanged;
    otherwise a new one replaces it (the old token is withdrawn). A token that cannot be
    published is withdrawn again.

    role
        ``worker`` or ``control_plane``: the node's role in Terraform's inventory.

    ttl
        Lifetime of a new token, in seconds: long enough for its wave.

    min_remaining
        Issue a new token when less than this is left.

    cidr
        Use the connection string whose address is in this network (the private
        network); default: the node's default address.
    """
    ret = _ret(name)
    if role not in ("worker", "control_plane"):
        return _fail(ret, f"role must be worker or control_plane, not {role!r}")
    if int(ttl) <= int(min_remaining):
        return _fail(ret, f"ttl ({ttl}) must be larger than min_remaining ({min_remaining})")
    if not _installed():
        return _missing(ret, f"issue a join credential for {name}",
                        {"credential": {"old": None, "new": {"role": role, "ttl": int(ttl)}}})
    path = kos_state.credential_file(__salt__, name)
    now = time.time()
    current = _published(path)
    issued = None
    try:
        check = __salt__["microk8s.cert_check"](snap_data)
        reason = _credential_left(current, now, min_remaining, check, snap_data)
        if reason is None and current.get("role") != role:
            reason = f"the issued credential is for a {current.get('role')}"
        if reason is None:
            if not __opts__["test"]:
                kos_state.publish_credential(__salt__, name)
            ret["comment"] = (f"join credential for {name} ({role}) issued, valid for "
                              f"{int(current['expires'] - now)}s more")
            return ret
        old = None if current is None else {"role": current.get("role"),
                                            "expires": current.get("expires")}
        ret["changes"] = {"credential": {"old": old, "new": {"role": role, "ttl": int(ttl)}}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"a join credential for {name} would be issued ({reason})"
            return ret
        if cidr and not __salt__["network.ip_addrs"](cidr=cidr, include_loopback=True):
            return _fail(ret, f"this node has no address in {cidr}: no credential issued")
        # our own token (as Canonical's charm does): known before add-node, so it can be
        # withdrawn whatever fails after
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
            "node": name,
            "role": role,
            "connection": chosen,
            "check": chosen.rsplit("/", 1)[-1],
            "issued": int(now),
            "expires": int(now + int(ttl)),
        }
        kos_state.write_json(path, doc)
        kos_state.publish_credential(__salt__, name)
        if current is not None:
            old_token = current.get("connection", "").split("/")[1:2]
            if old_token:
                __salt__["microk8s.remove_token"](old_token[0], snap_data)
    except (OSError, CommandExecutionError) as exc:
        if issued is not None:
            try:
                __salt__["microk8s.remove_token"](issued, snap_data)
                kos_state.remove(path)
            except (OSError, CommandExecutionError):
                pass
        return _fail(ret, f"issuing a join credential for {name} failed: {exc}")
    ret["changes"]["credential"]["new"]["expires"] = doc["expires"]
    ret["comment"] = f"join credential for {name} ({role}) issued and published ({reason})"
    return ret


def join_credentials_absent(name, nodes=None, snap_data=None):
    """
    Ensure the join credentials of ``nodes`` are revoked on this first control plane: the
    token goes from the cluster agent, the credential file from disk, the mine entry
    from the master.

    nodes
        Minion ids whose credentials go; None: every credential issued here.
    """
    ret = _ret(name)
    issued = kos_state.credential_nodes(__salt__)
    nodes = issued if nodes is None else [n for n in nodes if n in issued]
    if not nodes:
        ret["comment"] = "no join credential left"
        return ret
    ret["changes"] = {"credentials": {"old": sorted(nodes), "new": []}}
    if __opts__["test"]:
        ret["result"] = None
        ret["comment"] = "the join credentials would be revoked"
        return ret
    try:
        for node in nodes:
            path = kos_state.credential_file(__salt__, node)
            token = ((_published(path) or {}).get("connection") or "").split("/")[1:2]
            if token and _installed():
                __salt__["microk8s.remove_token"](token[0], snap_data)
            kos_state.remove(path)
            kos_state.withdraw_credential(__salt__, node)
    except (OSError, CommandExecutionError) as exc:
        return _fail(ret, f"revoking the join credentials failed: {exc}")
    ret["comment"] = f"join credentials revoked: {', '.join(ret['changes']['credentials']['old'])}"
    return ret


def _in_cluster():
    """A worker that joined, or a control plane whose datastore has other members: a stopped
    one is judged by the members it last knew (``microk8s.is_clustered``), never as alone."""
    return __salt__["microk8s.is_clustered"]()


def cluster_joined(name, source, role="worker", mine_function=None, min_remaining=60):
    """
    Ensure this node is part of the cluster whose first control-plane node is
    ``source``, joined in its ``role``. The credential comes from the mine, where
    ``source`` published it for this minion alone (``join_credential_present``), so it
    never passes through rendered SLS; one issued for another role is refused, and a
    worker joins with ``--worker``.

    A node already in a cluster does nothing. A failed join reports the CLI's
    message (e.g. ``Connection failed. Invalid token (500).``).

    source
        Minion id of the node that issued the credential.

    role
        ``worker`` or ``control_plane``.

    mine_function
        The mine entry to read (default ``kos_join_<this minion id>``).

    min_remaining
        Refuse a credential with less than this many seconds left.
    """
    ret = _ret(name)
    if role not in ("worker", "control_plane"):
        return _fail(ret, f"role must be worker or control_plane, not {role!r}")
    changes = {"cluster": {"old": "standalone", "new": f"joined {source} as {role}"}}
    if not _installed():
        return _missing(ret, f"join the cluster of {source} as {role}", changes)
    me = __opts__["id"]
    mine_function = mine_function or kos_state.mine_key(me)
    try:
        member = _in_cluster()
    except CommandExecutionError as exc:
        return _fail(ret, exc)
    try:
        if member:
            ret["comment"] = "already part of a cluster"
            return ret
        ret["changes"] = changes
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"would join the cluster of {source} as {role}"
            return ret
        info, problem = kos_state.issued_credential(
            __salt__, source, me, role, mine_function, "connection", min_remaining)
        if problem:
            return _fail(ret, problem)
        out = __salt__["microk8s.join"](info["connection"], worker=(role == "worker"))
        if not _in_cluster():
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
    snap is removed. A node without the snap, or alone, has nothing to leave. A stopped
    control plane that is still a member fails, in test mode too: ``microk8s leave`` runs
    only on a running node (its wrapper exits when stopped: ``exit_if_stopped`` in
    https://github.com/canonical/microk8s/blob/master/microk8s-resources/wrappers/microk8s-leave.wrapper),
    so the node must be started first.
    """
    ret = _ret(name)
    if not _installed():
        ret["comment"] = "microk8s is not installed: no cluster to leave"
        return ret
    try:
        if not _in_cluster():
            ret["comment"] = "not part of a cluster"
            return ret
        if __salt__["microk8s.status"]()["stopped"]:
            return _fail(ret, "microk8s is stopped and this node is still a member of its "
                              "cluster's datastore; microk8s leave needs it running: start it "
                              "(microk8s start), then leave")
        ret["changes"] = {"cluster": {"old": "member", "new": "standalone"}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = "would leave the cluster"
            return ret
        __salt__["microk8s.leave"]()
        if _in_cluster():
            return _fail(ret, "microk8s leave ran but the node is still in a cluster")
        ret["comment"] = "left the cluster"
    except CommandExecutionError as exc:
        return _fail(ret, f"microk8s leave failed: {exc}")
    return ret


# What refresh-certs regenerates without the nodes leaving the cluster
# (https://microk8s.io/docs/command-reference#heading--microk8s-refresh-certs): not ca.crt.
RENEWABLE = ("server.crt", "front-proxy-client.crt")


def certificates_renewed(name, within_days=30, force=False):
    """
    This control plane's server and front-proxy client certificates have at least
    ``within_days`` days left: when one has fewer (or with ``force``), ``microk8s
    refresh-certs --cert <it>`` (which restarts this node's services). The CA (ten years)
    is left alone: replacing it makes every other node leave and join again; the comment
    says when it is close.

    name
        A label.
    within_days
        Renew when a certificate has fewer days left than this.
    force
        Renew both whatever is left.
    """
    ret = _ret(name)
    if not _installed():
        return _missing(ret, "renew the control plane's certificates", {})
    try:
        left = __salt__["microk8s.certificates"]()
    except CommandExecutionError as exc:
        return _fail(ret, exc)
    due = {cert: left[cert] for cert in RENEWABLE
           if cert in left and (force or left[cert] < within_days)}
    ca_note = ""
    if left.get("ca.crt", within_days) < within_days:
        ca_note = (f"; the CA has {left['ca.crt']} days left: renew it by hand "
                   "(microk8s refresh-certs --cert ca.crt), then every other node leaves and "
                   "joins again")
    if not due:
        ret["comment"] = (f"the server and front-proxy client certificates have {within_days} "
                          f"days or more left{ca_note}" if left
                          else "this node holds no certificate to renew (a worker)")
        return ret
    if __opts__["test"]:
        ret["result"] = None
        ret["changes"] = {"certificates": {"old": due, "new": "renewed"}}
        ret["comment"] = "would renew " + ", ".join(due) + ca_note
        return ret
    try:
        for cert in due:
            __salt__["microk8s.refresh_certs"](cert)
        after = __salt__["microk8s.certificates"]()
    except CommandExecutionError as exc:
        return _fail(ret, exc)
    ret["changes"] = {"certificates": {"old": due, "new": {c: after.get(c) for c in due}}}
    ret["comment"] = "renewed " + ", ".join(due) + ca_note
    return ret


def _node(name):
    node = __salt__["microk8s.nodes"]().get(name)
    if node is None:
        raise CommandExecutionError(f"node {name} is not registered in the cluster")
    return node


def node_drained(name, timeout=None, absent_ok=False):
    """
    Ensure node ``name`` is cordoned and drained (run on a control plane), before
    something takes it away for a while (a refresh) or for good (it leaves). A node
    already cordoned is drained again: a drain that timed out earlier may have left Pods
    on it.

    timeout
        Seconds to wait for evictions.

    absent_ok
        A node that is not registered (it left already) is fine: a removal that stopped
        half-way runs again. An upgrade leaves it False: its node must be there.
    """
    ret = _ret(name)
    if not _installed():
        return _missing(ret, f"drain node {name}", {"schedulable": {"old": True, "new": False}})
    try:
        if absent_ok and name not in __salt__["microk8s.nodes"]():
            ret["comment"] = f"node {name} is not registered in the cluster"
            return ret
        node = _node(name)
        if node["unschedulable"]:
            ret["comment"] = f"node {name} is cordoned"
        else:
            ret["changes"] = {"schedulable": {"old": True, "new": False}}
        if __opts__["test"]:
            if ret["changes"]:
                ret["result"] = None
            ret["comment"] = f"node {name} would be drained"
            return ret
        __salt__["microk8s.drain"](name, timeout=timeout)
        if not _node(name)["unschedulable"]:
            return _fail(ret, f"kubectl drain {name} ran but the node is still schedulable")
        ret["comment"] = f"node {name} drained"
    except CommandExecutionError as exc:
        return _fail(ret, f"draining {name} failed: {exc}")
    return ret


def node_removed(name, force=False):
    """
    Ensure node ``name`` is no longer a member of the cluster (run on a control plane,
    after the node left: ``microk8s remove-node``): its Node object goes, and a control
    plane's place in the datastore.

    force
        Also when the node never left (its server is gone): ``remove-node --force``.
    """
    ret = _ret(name)
    if not _installed():
        return _missing(ret, f"remove node {name}", {"member": {"old": True, "new": False}})
    try:
        if name not in __salt__["microk8s.nodes"]():
            ret["comment"] = f"node {name} is not in the cluster"
            return ret
        ret["changes"] = {"member": {"old": True, "new": False}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"node {name} would be removed from the cluster"
            return ret
        __salt__["microk8s.remove_node"](name, force=force)
        if name in __salt__["microk8s.nodes"]():
            return _fail(ret, f"microk8s remove-node {name} ran but the node is still listed")
        ret["comment"] = f"node {name} removed from the cluster"
    except CommandExecutionError as exc:
        return _fail(ret, f"removing node {name} failed: {exc}")
    return ret


def node_uncordoned(name):
    """Ensure node ``name`` takes Pods again (run on a control plane)."""
    ret = _ret(name)
    if not _installed():
        return _missing(ret, f"uncordon node {name}", {"schedulable": {"old": False, "new": True}})
    try:
        if not _node(name)["unschedulable"]:
            ret["comment"] = f"node {name} is schedulable"
            return ret
        ret["changes"] = {"schedulable": {"old": False, "new": True}}
        if __opts__["test"]:
            ret["result"] = None
            ret["comment"] = f"node {name} would be uncordoned"
            return ret
        __salt__["microk8s.uncordon"](name)
        if _node(name)["unschedulable"]:
            return _fail(ret, f"kubectl uncordon {name} ran but the node is still cordoned")
        ret["comment"] = f"node {name} uncordoned"
    except CommandExecutionError as exc:
        return _fail(ret, f"uncordoning {name} failed: {exc}")
    return ret


def _track_of(version):
    """``v1.32.9`` -> ``1.32``."""
    parts = str(version or "").lstrip("v").split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else None


def node_ready(name, track, timeout=180, interval=2):
    """
    Wait until node ``name`` is Ready and its kubelet runs Kubernetes ``track`` (e.g.
    ``1.32``), as this control plane sees it: what an upgraded node must show before the
    next one goes. Changes nothing.

    timeout
        Seconds to wait.
    """
    ret = _ret(name)
    if not isinstance(track, str):
        # YAML reads 1.30 as the number 1.3
        return _fail(ret, f"track must be a string such as '1.32', got {track!r}")
    if not _installed():
        return _missing(ret, f"see node {name} Ready on {track}", {})
    if __opts__["test"]:
        ret["comment"] = f"would wait for node {name} to be Ready on {track}"
        return ret
    deadline = time.monotonic() + timeout
    node = None
    while True:
        try:
            node = __salt__["microk8s.nodes"]().get(name)
        except CommandExecutionError as exc:
            # the API server of a refreshing control plane answers again after a while
            node = {"error": str(exc)}
        if node and node.get("ready") and _track_of(node.get("version")) == track:
            ret["comment"] = f"node {name} is Ready on {node['version']}"
            return ret
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    if node is None:
        seen = "is not registered"
    elif "error" in node:
        seen = f"could not be read: {node['error']}"
    else:
        seen = f"is {'Ready' if node['ready'] else 'NotReady'} on {node.get('version')}"
    return _fail(ret, f"node {name} {seen} after {timeout} s; expected Ready on {track}")
