"""
Converge the certificates of a MicroK8s control plane: the extra subject alternative
names the API server certificate carries, and the server and front-proxy client
certificates renewed before they expire.
"""

import ipaddress
import os
import re

from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_microk8s, kos_state

__virtualname__ = "microk8s_certs"

SAN_MARKER = "#MOREIPS"
# SAN ids from here on belong to this state; lower ids are the snap's own or the operator's.
MANAGED_SAN_ID = 100
# What refresh-certs regenerates without the nodes leaving the cluster
# (https://microk8s.io/docs/command-reference#heading--microk8s-refresh-certs): not ca.crt.
RENEWABLE = ("server.crt", "front-proxy-client.crt")


def __virtual__():
    # Loads without the microk8s command too: a test run on a node without the snap
    # predicts what it would do instead of failing as "state not found".
    return __virtualname__


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
    """The SANs in ``sans`` that certificate SANs ``cert`` (``microk8s_certs.server_sans``) lack."""
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
    ret = kos_state.ret(name)
    sans = [str(s) for s in (sans or [])]
    if "microk8s_certs.certificates" not in __salt__:
        return kos_state.missing_module_predicting(
            ret, __opts__, "microk8s", "put the extra SANs into the API server certificate",
            {"sans": {"old": None, "new": sans}})
    path = os.path.join(kos_microk8s.snap_data(__salt__, snap_data), "certs", "csr.conf.template")
    template = kos_state.read_text(path)
    if template is None:
        return kos_state.fail(ret, f"cannot read {path}")
    if SAN_MARKER not in template:
        return kos_state.fail(ret, f"{path} has no {SAN_MARKER} line: cannot place extra SANs")
    old = _current_sans(template)
    try:
        lacking = _missing_from(__salt__["microk8s_certs.server_sans"](snap_data), sans)
    except CommandExecutionError as exc:
        return kos_state.fail(ret, exc)
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
        __salt__["microk8s_certs.refresh_certs"]("server.crt")
        lacking = _missing_from(__salt__["microk8s_certs.server_sans"](snap_data), sans)
        if lacking:
            raise CommandExecutionError(
                f"refresh-certs ran but server.crt lacks {', '.join(lacking)}")
    except (OSError, CommandExecutionError) as exc:
        try:
            kos_state.write_file(path, template, mode=mode)
        except OSError:
            pass
        return kos_state.fail(ret, f"updating the certificate SANs failed: {exc}")
    ret["comment"] = "extra SANs written and server.crt regenerated"
    return ret


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
    ret = kos_state.ret(name)
    if "microk8s_certs.certificates" not in __salt__:
        return kos_state.missing_module_predicting(
            ret, __opts__, "microk8s", "renew the control plane's certificates", {})
    try:
        left = __salt__["microk8s_certs.certificates"]()
    except CommandExecutionError as exc:
        return kos_state.fail(ret, exc)
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
            __salt__["microk8s_certs.refresh_certs"](cert)
        after = __salt__["microk8s_certs.certificates"]()
    except CommandExecutionError as exc:
        return kos_state.fail(ret, exc)
    ret["changes"] = {"certificates": {"old": due, "new": {c: after.get(c) for c in due}}}
    ret["comment"] = "renewed " + ", ".join(due) + ca_note
    return ret
