"""
Manage a kubeadm node through the ``kubeadm`` and ``kubectl`` commands.

Behaviour follows what the real CLIs print and return (stdout/stderr split, exit
code 1 on every failure, token list layout, reset prompt); see the project's CLI
reference, part B.

Join tokens and certificate keys never reach the minion log: every command whose
output carries one runs with ``output_loglevel="quiet"``, secrets are never passed
on a command line (``ps`` shows it to every local user), and texts returned or
raised are redacted.

:depends: ``kubeadm`` and ``kubectl`` on PATH; ``cryptography`` (ships with Salt)
"""

import datetime
import hashlib
import json
import logging
import math
import os
import re
import shutil
import socket
import tarfile
import tempfile
import time

import salt.utils.files
import salt.utils.yaml
from salt.exceptions import CommandExecutionError

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    HAS_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - Salt's own packages ship it
    HAS_CRYPTOGRAPHY = False

log = logging.getLogger(__name__)

__virtualname__ = "kubeadm"

DEFAULT_KUBE_DIR = "/etc/kubernetes"
CONFIG_API = "kubeadm.k8s.io/v1beta4"
# Description kubeadm gives the hidden token whose expiry drives the kubeadm-certs Secret.
CERT_TOKEN_DESCRIPTION = "Proxy for managing TTL for the kubeadm-certs secret"
STACK_HINT = "To see the stack trace of this error execute with --v=5 or higher"

TOKEN_RE = re.compile(r"\b([a-z0-9]{6})\.[a-z0-9]{16}\b")
# A certificate key; a CA hash (sha256:<hex>) is public and stays readable in errors.
CERT_KEY_RE = re.compile(r"(?<!sha256:)\b[0-9a-f]{64}\b")
# One `kubeadm token list` row: the description is the only field that may hold spaces.
TOKEN_ROW_RE = re.compile(
    r"^(?P<token>[a-z0-9]{6}\.[a-z0-9]{16})\s+(?P<ttl>\S+)\s+(?P<expires>\S+)\s+"
    r"(?P<usages>\S+)\s+(?P<description>.*?)\s+(?P<groups>\S+)\s*$"
)
# A row of either table of ``kubeadm certs check-expiration`` (D.6.1): the date is
# "Jan 02, 2006 15:04 UTC", the residual time one word, a CA column only in the first.
EXPIRY_ROW_RE = re.compile(
    r"^(?P<name>\S+)\s+(?P<expires>[A-Z][a-z]{2} \d{2}, \d{4} \d{2}:\d{2}) UTC\s+\S+\s+"
    r"(?:(?P<authority>\S+)\s+)?(?P<external>yes|no)\s*$"
)
EXPIRY_FORMAT = "%b %d, %Y %H:%M"
# What `kubeadm certs renew` prints for each certificate it renewed (D.6.2): "<long> renewed".
RENEW_LONG_NAMES = {
    "admin.conf": "certificate embedded in the kubeconfig file for the admin to use and for "
                  "kubeadm itself",
    "apiserver": "certificate for serving the Kubernetes API",
    "apiserver-etcd-client": "certificate the apiserver uses to access etcd",
    "apiserver-kubelet-client": "certificate for the API server to connect to kubelet",
    "controller-manager.conf": "certificate embedded in the kubeconfig file for the controller "
                               "manager to use",
    "etcd-healthcheck-client": "certificate for liveness probes to healthcheck etcd",
    "etcd-peer": "certificate for etcd nodes to communicate with each other",
    "etcd-server": "certificate for serving etcd",
    "front-proxy-client": "certificate for the front proxy client",
    "scheduler.conf": "certificate embedded in the kubeconfig file for the scheduler manager "
                      "to use",
    "super-admin.conf": "certificate embedded in the kubeconfig file for the super-admin",
}
# The routed pod network (kubeadm:network:mode routed): the routes kos keeps carry this
# iproute2 protocol number (unassigned in /etc/iproute2/rt_protos), so they are told apart
# from everyone else's; the pods' bridge and the CNI configuration that makes it.
POD_ROUTE_PROTO = "149"
POD_BRIDGE = "kos0"
POD_CNI_CONF = "/etc/cni/net.d/10-kos-routed.conflist"
POD_EGRESS_COMMENT = "kos: pod egress"
DRY_RUN_DIR_RE = re.compile(r'"(/etc/kubernetes/tmp/kubeadm-init-dryrun\d+)"')


def __virtual__():
    return __utils__["kos_cli.virtual"](
        __virtualname__, "kubeadm", "are the packages installed?"
    )


def get_kube_dir(kube_dir=None):
    """
    Return the directory kubeadm keeps this node's files in (``kubelet.conf``,
    ``admin.conf``, ``manifests``, ``pki``): ``kube_dir`` when given, else the
    ``kubeadm:kube_dir`` setting (minion configuration, grains, then pillar, as
    ``config.get`` looks), else ``/etc/kubernetes``. Every function of this module and
    the kubeadm states resolve it here.

    CLI Example:

    .. code-block:: bash

        salt '*' kubeadm.get_kube_dir
    """
    return kube_dir or __salt__["config.get"]("kubeadm:kube_dir", DEFAULT_KUBE_DIR)


_kube_dir = get_kube_dir


def _admin_conf(kubeconfig=None, kube_dir=None):
    return kubeconfig or os.path.join(_kube_dir(kube_dir), "admin.conf")


def _redact(text):
    """``text`` with every bootstrap token secret and certificate key replaced."""
    text = TOKEN_RE.sub(lambda m: f"{m.group(1)}.<redacted>", text or "")
    return CERT_KEY_RE.sub("<redacted>", text)


def _message(res):
    """kubeadm's own error text: stderr without the stack-trace hint."""
    lines = [
        line for line in (res.get("stderr") or "").splitlines() if line.strip() != STACK_HINT
    ]
    text = "\n".join(lines).strip() or (res.get("stdout") or "").strip()
    return _redact(text) or f"exit code {res.get('retcode')}"


def _run(args, secret=False, ok_retcodes=(0,), binary="kubeadm", stdin=None):
    """Run ``<binary> <args>``; ``secret`` keeps tokens and certificate keys out of the log."""
    return __utils__["kos_cli.run"](
        __salt__, [binary, *args], secret=secret, ok_retcodes=ok_retcodes, stdin=stdin,
        describe=_message,
    )


def _kubectl(args, kubeconfig=None, secret=False, ok_retcodes=(0,), kube_dir=None):
    return _run(
        ["--kubeconfig", _admin_conf(kubeconfig, kube_dir), *args],
        secret=secret,
        ok_retcodes=ok_retcodes,
        binary="kubectl",
    )


def _duration(value):
    """kubeadm durations are Go durations; plain numbers mean seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{int(value)}s"
    return str(value)


def _flags(table):
    """``--flag=value`` flags; ``is not None`` keeps 0 (a TTL of 0 means "never expires")."""
    return __utils__["kos_cli.flags"](table, joined=True)


def _forget():
    __utils__["kos_cli.forget"](__context__, __virtualname__)


def version():
    """
    Return the kubeadm version (``kubeadm version -o short``), e.g. ``v1.31.4``.

    CLI Example:

    .. code-block:: bash

        salt '*' kubeadm.version
    """
    return _run(["version", "-o", "short"])["stdout"].strip()


def init_status(kube_dir=None):
    """
    Whether this node is an initialized first control plane, judged by the outcome:
    the API answers through the control-plane endpoint (the admin kubeconfig's server)
    and the cluster holds what ``kubeadm init`` uploads last, the ``kubeadm-config``
    ConfigMap (phase upload-config) and the ``cluster-info`` ConfigMap joins read
    (phase bootstrap-token). The static Pod manifests alone prove nothing: kubeadm
    writes them in its control-plane phase, before it waits for the API (reference
    B.2.3), so an init that timed out leaves them behind.

    Returns ``{"initialized", "started" (kubeadm wrote the kube-apiserver manifest,
    which makes a second init refuse), "answers" (the API answered), "reason"}``.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.init_status
    """
    manifest = os.path.join(_kube_dir(kube_dir), "manifests", "kube-apiserver.yaml")
    ret = {"initialized": False, "started": os.path.exists(manifest), "answers": False,
           "reason": ""}
    if not ret["started"]:
        ret["reason"] = "kubeadm init has not run here (no kube-apiserver manifest)"
        return ret
    admin = _admin_conf(kube_dir=kube_dir)
    try:
        config = object_exists("configmap", "kubeadm-config", "kube-system", admin)
        info = object_exists("configmap", "cluster-info", "kube-public", admin)
    except CommandExecutionError as exc:
        ret["reason"] = f"the API does not answer through the control-plane endpoint ({exc})"
        return ret
    ret["answers"] = True
    if not config:
        ret["reason"] = "kubeadm init stopped before upload-config (no kube-system/kubeadm-config)"
    elif not info:
        ret["reason"] = "kubeadm init stopped before bootstrap-token (no kube-public/cluster-info)"
    else:
        ret.update(initialized=True, reason="the control plane is initialized")
    return ret


def is_initialized(kube_dir=None):
    """
    True when this node is an initialized first control plane (see ``init_status``).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-*' kubeadm.is_initialized
    """
    return init_status(kube_dir)["initialized"]


def join_status(node_name, control_plane=False, stacked_etcd=True, kube_dir=None):
    """
    Whether this node has joined, judged by the outcome: its Node object is registered
    and, for a control plane with stacked etcd, it runs an etcd member. ``kubelet.conf``
    alone proves nothing: a control-plane join writes it in kubelet-start, before the
    etcd member is added (reference B.6.2).

    Returns ``{"joined", "started" (kubeadm left files a new join would refuse:
    kubelet.conf, static Pod manifests or, on a worker, the cluster CA), "answers" (the
    API answered), "reason"}``.

    node_name
        The Kubernetes node name.

    control_plane
        Also require an etcd member on this node (``stacked_etcd``).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-2*' kubeadm.join_status k8s-cp-2 control_plane=True
    """
    kube = _kube_dir(kube_dir)
    kubelet_conf = os.path.join(kube, "kubelet.conf")
    manifests = os.path.join(kube, "manifests")
    leftovers = os.path.exists(kubelet_conf) or (
        os.path.isdir(manifests) and bool(os.listdir(manifests))
        if control_plane else os.path.exists(os.path.join(kube, "pki", "ca.crt"))
    )
    ret = {"joined": False, "started": leftovers, "answers": False, "reason": ""}
    if not os.path.exists(kubelet_conf):
        ret["reason"] = ("kubeadm join stopped before kubelet-start (no kubelet.conf)"
                         if leftovers else "kubeadm join has not run here")
        return ret
    admin = os.path.join(kube, "admin.conf")
    kubeconfig = admin if control_plane and os.path.exists(admin) else kubelet_conf
    try:
        registered = object_exists("node", node_name, None, kubeconfig)
        member = registered and (not (control_plane and stacked_etcd) or object_exists(
            "pod", f"etcd-{node_name}", "kube-system", kubeconfig))
    except CommandExecutionError as exc:
        ret["reason"] = f"the API does not answer ({exc})"
        return ret
    ret["answers"] = True
    if not registered:
        ret["reason"] = f"node {node_name} is not registered in the cluster"
    elif not member:
        ret["reason"] = (f"node {node_name} is registered but runs no etcd member "
                         f"(no Pod kube-system/etcd-{node_name})")
    else:
        ret.update(joined=True, reason=f"node {node_name} has joined")
    return ret


def is_joined(node_name, control_plane=False, stacked_etcd=True, kube_dir=None):
    """
    True when this node has joined (see ``join_status``).

    CLI Example:

    .. code-block:: bash

        salt '*' kubeadm.is_joined k8s-worker-1
    """
    return join_status(node_name, control_plane, stacked_etcd, kube_dir)["joined"]


def has_local_files(kube_dir=None):
    """
    True when ``kubeadm init`` or ``join`` left anything ``kubeadm reset`` removes:
    ``kubelet.conf`` (every member) or the kube-apiserver manifest (control planes).

    CLI Example:

    .. code-block:: bash

        salt '*' kubeadm.has_local_files
    """
    kube = _kube_dir(kube_dir)
    return os.path.exists(os.path.join(kube, "kubelet.conf")) or os.path.exists(
        os.path.join(kube, "manifests", "kube-apiserver.yaml")
    )


def etcd_members(kubeconfig=None):
    """
    Return the names of the nodes that run a kubeadm etcd member: kubeadm writes a
    node's etcd static Pod only after it added the member (reference B.6.2), and finds
    the cluster's etcd endpoints the same way, from these Pods.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.etcd_members
    """
    out = _kubectl(["get", "pods", "--namespace", "kube-system", "-l",
                    "component=etcd,tier=control-plane", "-o", "json"], kubeconfig)["stdout"]
    try:
        items = json.loads(out)["items"]
    except (ValueError, KeyError) as exc:
        raise CommandExecutionError("kubectl printed no pod list") from exc
    return sorted({(i.get("spec") or {}).get("nodeName") for i in items} - {None})


def init(config, upload_certs=False, dry_run=False, ignore_preflight_errors=None,
         skip_phases=None, kube_dir=None):
    """
    Initialize the first control-plane node (``kubeadm init --config CONFIG``).

    Returns kubeadm's output with the token and certificate key redacted.

    config
        Path of the InitConfiguration/ClusterConfiguration file.

    upload_certs
        Also upload the control-plane certificates (``--upload-certs``).

    dry_run
        Only show what would be done (``--dry-run``); kubeadm writes into a
        temporary directory under ``/etc/kubernetes/tmp``, which is removed again.

    ignore_preflight_errors
        List of preflight check names to turn into warnings.

    skip_phases
        List of init phases to skip.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.init /etc/kubernetes/kubeadm-config.yaml dry_run=True
    """
    args = ["init", "--config", config]
    args += _flags(
        [
            ("--upload-certs", upload_certs),
            ("--dry-run", dry_run),
            ("--ignore-preflight-errors", ignore_preflight_errors),
            ("--skip-phases", skip_phases),
        ]
    )
    try:
        out = _run(args, secret=True)["stdout"]
    finally:
        _forget()
    if dry_run:
        match = DRY_RUN_DIR_RE.search(out)
        if match:
            # kubeadm leaves its dry-run directory behind; a test run should not.
            rel = os.path.relpath(match.group(1), DEFAULT_KUBE_DIR)
            shutil.rmtree(os.path.join(_kube_dir(kube_dir), rel), ignore_errors=True)
    return _redact(out)


def upload_certs(config=None):
    """
    Upload the control-plane certificates into the ``kube-system/kubeadm-certs``
    Secret (``kubeadm init phase upload-certs --upload-certs``) and return the
    certificate key that decrypts them. The Secret expires after two hours. Never
    logged.

    config
        kubeadm configuration file (needed with external etcd, so the etcd client
        certificates are uploaded too).

    A key of your own would have to pass through ``--certificate-key`` on the
    command line (visible in ``ps``), so kubeadm always generates it here.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.upload_certs
    """
    args = ["init", "phase", "upload-certs", "--upload-certs"]
    args += _flags([("--config", config)])
    try:
        out = _run(args, secret=True)["stdout"]
    finally:
        _forget()
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    if not lines or not CERT_KEY_RE.fullmatch(lines[-1]):
        raise CommandExecutionError("kubeadm upload-certs printed no certificate key")
    return lines[-1]


def token_create(ttl=None, description=None, usages=None, groups=None):
    """
    Create a bootstrap token (``kubeadm token create``) and return it
    (``id.secret``). Never logged.

    ttl
        Lifetime: seconds, or a Go duration (``15m``). ``0`` never expires.

    description
        Shown by ``kubeadm token list``.

    usages
        List, default ``[signing, authentication]``.

    groups
        List of extra groups, default the kubeadm node bootstrap group.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.token_create ttl=3600 description='kos join wave'
    """
    args = ["token", "create"]
    args += _flags(
        [
            ("--ttl", None if ttl is None else _duration(ttl)),
            ("--description", description),
            ("--usages", usages),
            ("--groups", groups),
        ]
    )
    try:
        token = _run(args, secret=True)["stdout"].strip()
    finally:
        _forget()
    if not TOKEN_RE.fullmatch(token):
        raise CommandExecutionError("kubeadm token create printed no token")
    return token


def _parse_expires(text):
    if text == "<never>":
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError as exc:
        raise CommandExecutionError(f"unreadable token expiry {text!r}") from exc


def token_list():
    """
    Return the cluster's bootstrap tokens without their secrets, as parsed from
    ``kubeadm token list``: a list of ``{"id", "expires" (unix time or None),
    "usages", "description", "groups"}``. Expired tokens are gone (the token
    cleaner removes them).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.token_list
    """
    key = "kubeadm.token_list"
    if key in __context__:
        return __context__[key]
    out = _run(["token", "list"], secret=True)["stdout"]
    tokens = []
    for line in out.splitlines():
        match = TOKEN_ROW_RE.match(line)
        if not match:
            continue
        none = lambda v: [] if v == "<none>" else v.split(",")  # noqa: E731
        tokens.append(
            {
                "id": match.group("token").split(".", 1)[0],
                "expires": _parse_expires(match.group("expires")),
                "usages": none(match.group("usages")),
                "description": "" if match.group("description") == "<none>"
                else match.group("description"),
                "groups": none(match.group("groups")),
            }
        )
    __context__[key] = tokens
    return tokens


def _expiry_rows(lines):
    """``{name: row}`` of one table of ``kubeadm certs check-expiration``; a name maps to
    None when kubeadm printed ``!MISSING! <name>``."""
    rows = {}
    for line in lines:
        if not line.strip():
            break
        if line.startswith("!MISSING! "):
            rows[line.split()[1]] = None
            continue
        match = EXPIRY_ROW_RE.match(line)
        if not match:
            raise CommandExecutionError(f"unreadable kubeadm certs check-expiration row: {line!r}")
        rows[match.group("name")] = match
    return rows


def _days_left(expires, now):
    return math.floor((expires - now) / 86400)


def certificates(kube_dir=None):
    """
    Return what ``kubeadm certs check-expiration`` reports on this control plane (day-2
    reference D.6.1): ``{"certificates": {name: entry}, "authorities": {name: entry}}``,
    ``entry`` being ``{"expires": unix time, "days": whole days left (negative once
    expired), "authority": its CA (certificates only), "externally_managed": bool}``, or
    None for a file kubeadm reports missing. kubeadm reports and changes nothing, also
    when a certificate has expired; ``kubelet.conf`` rotates by itself and is not listed.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-*' kubeadm.certificates
    """
    lines = _run(["certs", "check-expiration", *_cert_args(kube_dir)])["stdout"].splitlines()
    heads = [i for i, line in enumerate(lines) if line.startswith("CERTIFICATE ")]
    if len(heads) != 2:
        raise CommandExecutionError("kubeadm certs check-expiration printed no tables")
    now = time.time()
    ret = {"certificates": {}, "authorities": {}}
    for table, head in zip(("certificates", "authorities"), heads):
        for name, match in _expiry_rows(lines[head + 1:]).items():
            if match is None:
                ret[table][name] = None
                continue
            expires = datetime.datetime.strptime(
                match.group("expires"), EXPIRY_FORMAT
            ).replace(tzinfo=datetime.timezone.utc).timestamp()
            entry = {"expires": expires, "days": _days_left(expires, now),
                     "externally_managed": match.group("external") == "yes"}
            if table == "certificates":
                entry["authority"] = match.group("authority")
            ret[table][name] = entry
    return ret


def _cert_args(kube_dir):
    """Where this node keeps its files, when not kubeadm's default."""
    if not kube_dir and _kube_dir() == DEFAULT_KUBE_DIR:
        return []
    base = _kube_dir(kube_dir)
    return ["--cert-dir", os.path.join(base, "pki"), "--kubeconfig", os.path.join(base, "admin.conf")]


def renew_certificates(name="all", kube_dir=None):
    """
    Renew this control plane's certificates (``kubeadm certs renew NAME``, day-2 reference
    D.6.2/D.6.3): every leaf of ``certificates`` with ``all``, its subject and SANs kept, a
    year more; the CAs never. Return the names kubeadm said it renewed. The running
    control-plane components keep the old certificates until they restart
    (``restart_control_plane``); run it on each control plane.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.renew_certificates
    """
    out = _run(["certs", "renew", name, *_cert_args(kube_dir)])["stdout"]
    long_names = {long: short for short, long in RENEW_LONG_NAMES.items()}
    return [long_names[line[: -len(" renewed")]] for line in out.splitlines()
            if line.endswith(" renewed") and line[: -len(" renewed")] in long_names]


def restart_control_plane(wait=20, timeout=120, kube_dir=None):
    """
    Restart this node's static control-plane Pods so they load renewed certificates: their
    manifests leave ``<kube_dir>/manifests`` for ``wait`` seconds (the kubelet stops the
    Pods) and come back (it starts them again), as the kubeadm documentation describes;
    then wait up to ``timeout`` seconds for the API. Return the manifests moved.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.restart_control_plane
    """
    manifests = os.path.join(_kube_dir(kube_dir), "manifests")
    names = sorted(n for n in os.listdir(manifests) if n.endswith(".yaml")) \
        if os.path.isdir(manifests) else []
    aside = tempfile.mkdtemp(prefix="kos-manifests-", dir=_kube_dir(kube_dir))
    try:
        for name in names:
            os.rename(os.path.join(manifests, name), os.path.join(aside, name))
        time.sleep(float(wait))
    finally:
        # whatever happened, every manifest goes back
        for name in names:
            if os.path.exists(os.path.join(aside, name)):
                os.rename(os.path.join(aside, name), os.path.join(manifests, name))
        os.rmdir(aside)
    if not api_ready(timeout=timeout, kubeconfig=os.path.join(_kube_dir(kube_dir), "admin.conf")):
        raise CommandExecutionError(
            f"the API did not answer within {timeout} s after the control plane restarted")
    return names


def token_delete(token):
    """
    Delete a bootstrap token (``kubeadm token delete``) by ID or full token.
    Deleting the token that owns the ``kubeadm-certs`` Secret removes the Secret too.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.token_delete abcdef
    """
    token_id = token.split(".", 1)[0]
    try:
        return _run(["token", "delete", token_id])["stdout"].strip()
    finally:
        _forget()


def join_command(ttl=None, certificate_key=None):
    """
    Create a new token and return the join command kubeadm prints for it
    (``kubeadm token create --print-join-command``), parsed:
    ``{"api_server_endpoint", "token", "ca_cert_hash", "control_plane",
    "certificate_key"}``. Never logged. For operators: kubeadm takes the
    certificate key on its command line here, so the states publish credentials
    with ``token_create``/``upload_certs`` instead.

    ttl
        Lifetime of the new token (seconds or a Go duration).

    certificate_key
        A key from a recent ``upload_certs``: returns the control-plane form.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.join_command ttl=900
    """
    args = ["token", "create", "--print-join-command"]
    args += _flags(
        [
            ("--ttl", None if ttl is None else _duration(ttl)),
            ("--certificate-key", certificate_key),
        ]
    )
    try:
        words = _run(args, secret=True)["stdout"].split()
    finally:
        _forget()
    if words[:2] != ["kubeadm", "join"] or len(words) < 7:
        raise CommandExecutionError("kubeadm printed no join command")
    opts = dict(zip(words[3::2], words[4::2]))
    return {
        "api_server_endpoint": words[2],
        "token": opts.get("--token"),
        "ca_cert_hash": opts.get("--discovery-token-ca-cert-hash"),
        "control_plane": "--control-plane" in words,
        "certificate_key": words[words.index("--certificate-key") + 1]
        if "--certificate-key" in words
        else None,
    }


def ca_cert_hash(ca_file=None):
    """
    Return ``sha256:<hex>`` of the cluster CA's SubjectPublicKeyInfo, the value of
    ``--discovery-token-ca-cert-hash``. Computed from the DER SPKI, so it is right
    for ECDSA CAs too (the widespread ``openssl rsa`` recipe is not).

    ca_file
        Default ``<kube_dir>/pki/ca.crt``.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.ca_cert_hash
    """
    if not HAS_CRYPTOGRAPHY:
        raise CommandExecutionError("kubeadm.ca_cert_hash needs the cryptography package")
    path = ca_file or os.path.join(_kube_dir(), "pki", "ca.crt")
    try:
        with salt.utils.files.fopen(path, "rb") as fh:
            cert = x509.load_pem_x509_certificate(fh.read())
    except (OSError, ValueError) as exc:
        raise CommandExecutionError(f"cannot read the CA certificate {path}: {exc}") from exc
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def _extra_args(value):
    """v1beta4 wants ``[{name, value}]``; accept a mapping too."""
    if not value:
        return []
    if isinstance(value, dict):
        return [{"name": str(k), "value": str(v)} for k, v in sorted(value.items())]
    return [{"name": str(item["name"]), "value": str(item["value"])} for item in value]


def join_configuration(api_server_endpoint, token, ca_cert_hash, control_plane=False,
                       certificate_key=None, node_name=None, advertise_address=None,
                       bind_port=None, cri_socket=None, kubelet_extra_args=None,
                       discovery_timeout=None):
    """
    Return the v1beta4 JoinConfiguration document (a dict) that ``join`` writes.
    Exposed for tests and for operators debugging a join; holds the token.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-worker-1*' kubeadm.join_configuration 127.0.0.1:7443 <token> sha256:<hex>
    """
    hashes = [ca_cert_hash] if isinstance(ca_cert_hash, str) else list(ca_cert_hash)
    doc = {
        "apiVersion": CONFIG_API,
        "kind": "JoinConfiguration",
        "discovery": {
            "bootstrapToken": {
                "apiServerEndpoint": api_server_endpoint,
                "token": token,
                "caCertHashes": hashes,
            }
        },
    }
    registration = {}
    if node_name:
        registration["name"] = node_name
    if cri_socket:
        registration["criSocket"] = cri_socket
    if kubelet_extra_args:
        registration["kubeletExtraArgs"] = _extra_args(kubelet_extra_args)
    if registration:
        doc["nodeRegistration"] = registration
    if control_plane:
        endpoint = {}
        if advertise_address:
            endpoint["advertiseAddress"] = advertise_address
        if bind_port is not None:
            endpoint["bindPort"] = int(bind_port)
        doc["controlPlane"] = {"localAPIEndpoint": endpoint}
        if certificate_key:
            doc["controlPlane"]["certificateKey"] = certificate_key
    if discovery_timeout is not None:
        doc["timeouts"] = {"discovery": _duration(discovery_timeout)}
    return doc


def join(api_server_endpoint, token, ca_cert_hash, control_plane=False, certificate_key=None,
         node_name=None, advertise_address=None, bind_port=None, cri_socket=None,
         kubelet_extra_args=None, discovery_timeout=None, ignore_preflight_errors=None):
    """
    Join the cluster behind ``api_server_endpoint`` (``kubeadm join --config``).

    The token and key go into a JoinConfiguration file readable by root only, which
    is removed afterwards: on a command line they would show in ``ps``. Per-node
    kubelet flags (``cloud-provider=external``) can only be set this way too.
    Returns kubeadm's output, redacted; raises with kubeadm's error otherwise (an
    expired token fails after the discovery timeout with ``could not find a JWS
    signature``; a stale certificate key with ``Secret "kubeadm-certs" was not
    found``).

    api_server_endpoint
        ``host:port`` of the API (the controlPlaneEndpoint).

    token
        Bootstrap token ``id.secret``.

    ca_cert_hash
        ``sha256:<hex>`` (or a list of them) pinning the cluster CA.

    control_plane
        Join as a control-plane node; needs ``certificate_key``.

    certificate_key
        Key from ``upload_certs``.

    node_name, advertise_address, bind_port, cri_socket
        Node registration and (control planes) local API endpoint.

    kubelet_extra_args
        Mapping or ``[{name, value}]`` list of kubelet flags for this node.

    discovery_timeout
        How long to retry discovery (seconds or Go duration; kubeadm: 5m).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-worker-1*' kubeadm.join 127.0.0.1:7443 <token> sha256:<hex>
    """
    doc = join_configuration(
        api_server_endpoint, token, ca_cert_hash, control_plane=control_plane,
        certificate_key=certificate_key, node_name=node_name,
        advertise_address=advertise_address, bind_port=bind_port, cri_socket=cri_socket,
        kubelet_extra_args=kubelet_extra_args, discovery_timeout=discovery_timeout,
    )
    tmpdir = tempfile.mkdtemp(prefix="kos-kubeadm-join-")
    path = os.path.join(tmpdir, "join.yaml")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(salt.utils.yaml.safe_dump(doc, default_flow_style=False))
        args = ["join", "--config", path]
        args += _flags([("--ignore-preflight-errors", ignore_preflight_errors)])
        return _redact(_run(args, secret=True)["stdout"])
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
        _forget()


def reset(force=True, dry_run=False, cleanup_tmp_dir=False):
    """
    Undo ``init``/``join`` on this node (``kubeadm reset``). A control-plane node
    also leaves the etcd cluster. Left behind (as kubeadm says): CNI config,
    iptables/IPVS rules, ``$HOME/.kube/config``, packages.

    force
        Do not prompt (``-f``); without it kubeadm waits for an answer and fails.

    dry_run
        Only show what would be done.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-worker-2*' kubeadm.reset
    """
    args = ["reset"] + _flags(
        [("--force", force), ("--dry-run", dry_run), ("--cleanup-tmp-dir", cleanup_tmp_dir)]
    )
    try:
        # stdin closed: an unexpected prompt fails instead of hanging
        return _redact(_run(args, stdin="")["stdout"])
    finally:
        _forget()


def nodes(kubeconfig=None):
    """
    Return the cluster's nodes as seen with the admin kubeconfig:
    ``{name: {"ready", "roles", "ip", "unschedulable", "taints", "version"}}`` (version: the
    kubelet's, as the node reports it).

    kubeconfig
        Default ``<kube_dir>/admin.conf``.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.nodes
    """
    key = f"kubeadm.nodes:{kubeconfig}"
    if key in __context__:
        return __context__[key]
    res = _kubectl(["get", "nodes", "-o", "json"], kubeconfig)
    try:
        items = json.loads(res["stdout"])["items"]
    except (ValueError, KeyError) as exc:
        raise CommandExecutionError("kubectl printed no node list") from exc
    ret = {item["metadata"]["name"]: _node_record(item) for item in items}
    __context__[key] = ret
    return ret


def _node_record(item):
    """One Node object as ``nodes`` returns it."""
    labels = item["metadata"].get("labels") or {}
    status = item.get("status") or {}
    spec = item.get("spec") or {}
    return {
        "ready": any(
            c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions", [])
        ),
        "roles": sorted(
            k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")
        ),
        "ip": next(
            (a["address"] for a in status.get("addresses", []) if a["type"] == "InternalIP"),
            None,
        ),
        "unschedulable": bool(spec.get("unschedulable")),
        "taints": spec.get("taints") or [],
        "version": (status.get("nodeInfo") or {}).get("kubeletVersion"),
        "pod_cidr": spec.get("podCIDR"),
    }


def node(name, kubeconfig=None):
    """
    Return Node ``name`` as ``nodes`` describes each (None: not registered), read by name:
    from v1.32 the Node authorizer lets a kubelet's credential (kubelet.conf) read its own
    Node, not list them all.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-worker-1*' kubeadm.node k8s-worker-1 kubeconfig=/etc/kubernetes/kubelet.conf
    """
    res = _kubectl(["get", "node", name, "-o", "json"], kubeconfig, ok_retcodes=(0, 1))
    if res["retcode"] != 0:
        if "NotFound" in (res.get("stderr") or "") or "not found" in (res.get("stderr") or ""):
            return None
        raise CommandExecutionError(_message(res))
    try:
        return _node_record(json.loads(res["stdout"]))
    except (ValueError, KeyError) as exc:
        raise CommandExecutionError(f"kubectl printed no node {name}") from exc


def evictable_pods(node, kubeconfig=None):
    """
    Return the Pods on ``node`` that ``drain`` (as this module runs it) evicts and that
    are still there: every Pod bound to the node except DaemonSet Pods, static Pods'
    mirrors and Pods that already finished (reference D.5.2), as ``namespace/name``.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.evictable_pods k8s-worker-2
    """
    out = _kubectl(["get", "pods", "--all-namespaces", "--field-selector",
                    f"spec.nodeName={node}", "-o", "json"], kubeconfig)["stdout"]
    try:
        items = json.loads(out)["items"]
    except (ValueError, KeyError) as exc:
        raise CommandExecutionError("kubectl printed no pod list") from exc
    left = []
    for pod in items:
        meta = pod.get("metadata") or {}
        owners = {o.get("kind") for o in meta.get("ownerReferences") or []}
        mirror = "kubernetes.io/config.mirror" in (meta.get("annotations") or {})
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if "DaemonSet" in owners or mirror or finished:
            continue
        left.append(f"{meta.get('namespace', 'default')}/{meta.get('name')}")
    return sorted(left)


def drain(node, timeout=None, kubeconfig=None):
    """
    Cordon ``node`` and evict its Pods (``kubectl drain --ignore-daemonsets
    --delete-emptydir-data --force``): DaemonSet Pods stay, emptyDir data and
    unmanaged Pods go, as a node that is about to be reset requires.

    timeout
        Seconds to wait for evictions (default: no limit).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.drain k8s-worker-2
    """
    args = ["drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--force"]
    args += _flags([("--timeout", None if timeout is None else _duration(timeout))])
    try:
        return _kubectl(args, kubeconfig)["stdout"]
    finally:
        _forget()


def delete_node(node, ignore_not_found=False, kubeconfig=None):
    """
    Delete the Node object (``kubectl delete node``). ``kubeadm reset`` leaves it
    behind; a kubelet still running would register it again, so reset first.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.delete_node k8s-worker-2
    """
    args = ["delete", "node", node] + _flags([("--ignore-not-found", ignore_not_found)])
    try:
        return _kubectl(args, kubeconfig)["stdout"]
    finally:
        _forget()


def apply(path, kubeconfig=None):
    """
    Apply a manifest file (``kubectl apply -f``) and return what happened to each
    object: ``{"<kind>/<name>": "created"|"configured"|"unchanged"}``.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.apply /etc/kubernetes/addons/kube-router.yaml
    """
    try:
        out = _kubectl(["apply", "-f", path], kubeconfig)["stdout"]
    finally:
        _forget()
    ret = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 2:
            ret[words[0]] = words[1]
    return ret


def object_exists(kind, name, namespace=None, kubeconfig=None):
    """
    True when the object exists (``kubectl get KIND NAME --ignore-not-found``).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.object_exists daemonset kube-router namespace=kube-system
    """
    args = ["get", kind, name, "-o", "name", "--ignore-not-found"]
    args += _flags([("--namespace", namespace)])
    return bool(_kubectl(args, kubeconfig)["stdout"].strip())


def api_ready(timeout=60, kubeconfig=None, interval=1):
    """
    Wait until the API answers through ``kubeconfig`` (``kubectl version``) and
    return True; False after ``timeout`` seconds. After ``init`` the local load
    balancer needs a health check or two before it routes to the new API server.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.api_ready timeout=30
    """
    deadline = time.time() + float(timeout)
    while True:
        try:
            out = _kubectl(["version", "-o", "json"], kubeconfig)["stdout"]
            if json.loads(out).get("serverVersion"):
                return True
        except (CommandExecutionError, ValueError):
            pass
        if time.time() >= deadline:
            return False
        time.sleep(interval)


# -- images without a registry ----------------------------------------------------------------


def images(namespace="k8s.io"):
    """
    Return the references of the images containerd holds in ``namespace`` (``ctr images
    list``), without the bare digests.

    CLI Example:

    .. code-block:: bash

        salt '*' kubeadm.images
    """
    res = _run(["-n", namespace, "images", "list", "-q"], binary="ctr")
    return sorted(ref for ref in res["stdout"].split() if not ref.startswith("sha256:"))


def archive_images(path):
    """
    Return the image references an archive names: ``RepoTags`` of a ``docker save``
    archive, the ``io.containerd.image.name`` / ``org.opencontainers.image.ref.name``
    annotations of an OCI layout.

    CLI Example:

    .. code-block:: bash

        salt '*' kubeadm.archive_images /srv/images/pause.tar
    """
    refs = []
    try:
        with tarfile.open(path) as tar:
            names = set(tar.getnames())
            if "manifest.json" in names:
                for entry in json.load(tar.extractfile("manifest.json")):
                    refs += entry.get("RepoTags") or []
            elif "index.json" in names:
                for desc in json.load(tar.extractfile("index.json")).get("manifests", []):
                    notes = desc.get("annotations") or {}
                    ref = notes.get("io.containerd.image.name") or notes.get(
                        "org.opencontainers.image.ref.name")
                    if ref:
                        refs.append(ref)
    except (OSError, tarfile.TarError, ValueError) as exc:
        raise CommandExecutionError(f"{path} is not an image archive: {exc}") from exc
    return refs


def import_images(path, namespace="k8s.io"):
    """
    Import an image archive into containerd's ``namespace`` (``ctr images import``).

    CLI Example:

    .. code-block:: bash

        salt '*' kubeadm.import_images /srv/images/pause.tar
    """
    _run(["-n", namespace, "images", "import", path], binary="ctr")
    return archive_images(path)


# -- the routed pod network -------------------------------------------------------------------


def _ip(args, ok_retcodes=(0,)):
    return _run(args, binary="ip", ok_retcodes=ok_retcodes)


def _cni_conf(pod_cidr):
    conf = {
        "cniVersion": "1.0.0",
        "name": "kos-routed",
        "plugins": [
            {
                "type": "bridge", "bridge": POD_BRIDGE, "isGateway": True,
                # other nodes' pods see this pod's own address: no NAT inside the cluster
                "ipMasq": False, "hairpinMode": True,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": pod_cidr}]],
                         "routes": [{"dst": "0.0.0.0/0"}]},
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }
    return json.dumps(conf, indent=2, sort_keys=True) + "\n"


def pod_routes():
    """
    Return the pod routes kos keeps on this node: ``{pod CIDR: via}``.

    CLI Example:

    .. code-block:: bash

        salt '*' kubeadm.pod_routes
    """
    res = _ip(["-j", "route", "show", "proto", POD_ROUTE_PROTO])
    try:
        rows = json.loads(res["stdout"] or "[]")
    except ValueError as exc:
        raise CommandExecutionError("ip printed no route list") from exc
    return {row["dst"]: row.get("gateway") for row in rows}


def sync_pod_network(node_name, cluster_cidr, kube_dir=None, cni_conf=POD_CNI_CONF, test=False):
    """
    Bring this node's routed pod network in line with the API's nodes (read with the
    kubelet's own credential): the CNI configuration for this node's pod CIDR, a route to
    every other node's pod CIDR via its InternalIP (routes of gone nodes removed), and
    masquerading of what the pods send out of the cluster. Returns ``{"pod_cidr",
    "changes"}``; ``test`` changes nothing.

    node_name
        This node's name in Kubernetes.

    cluster_cidr
        The cluster's pod network (kubeadm's podSubnet).

    cni_conf
        Where the CNI configuration goes.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-worker-1*' kubeadm.sync_pod_network k8s-worker-1 10.244.0.0/16
    """
    kubeconfig = os.path.join(_kube_dir(kube_dir), "kubelet.conf")
    if not os.path.exists(kubeconfig):
        raise CommandExecutionError(f"{kubeconfig} is missing: this node has not joined")
    __context__.pop(f"kubeadm.nodes:{kubeconfig}", None)
    found = nodes(kubeconfig=kubeconfig)
    mine = found.get(node_name) or {}
    if not mine.get("pod_cidr"):
        raise CommandExecutionError(f"the API gives node {node_name} no pod CIDR (yet)")
    changes = {}
    conf = _cni_conf(mine["pod_cidr"])
    try:
        with salt.utils.files.fopen(cni_conf) as fh:
            old_conf = fh.read()
    except OSError:
        old_conf = None
    if old_conf != conf:
        old = json.loads(old_conf)["plugins"][0]["ipam"]["ranges"][0][0]["subnet"] if (
            old_conf and POD_BRIDGE in old_conf) else None
        changes["cni"] = {"old": old, "new": mine["pod_cidr"]}
        if not test:
            os.makedirs(os.path.dirname(cni_conf), exist_ok=True)
            with salt.utils.files.fopen(cni_conf + ".tmp", "w") as fh:
                fh.write(conf)
            os.replace(cni_conf + ".tmp", cni_conf)
    want = {
        n["pod_cidr"]: n["ip"] for name, n in found.items()
        if name != node_name and n.get("pod_cidr") and n.get("ip")
    }
    have = pod_routes()
    add = {dst: via for dst, via in want.items() if have.get(dst) != via}
    gone = sorted(dst for dst in have if dst not in want)
    if add or gone:
        changes["routes"] = {"old": have, "new": want}
    if not test:
        for dst, via in sorted(add.items()):
            _ip(["route", "replace", dst, "via", via, "proto", POD_ROUTE_PROTO])
        for dst in gone:
            _ip(["route", "del", dst, "proto", POD_ROUTE_PROTO], ok_retcodes=(0, 2))
    rule = ["-s", cluster_cidr, "!", "-d", cluster_cidr, "-m", "comment", "--comment",
            POD_EGRESS_COMMENT, "-j", "MASQUERADE"]
    present = _run(["-t", "nat", "-C", "POSTROUTING", *rule], binary="iptables",
                   ok_retcodes=(0, 1))["retcode"] == 0
    if not present:
        changes["egress"] = {"old": None, "new": f"masquerade {cluster_cidr} leaving it"}
        if not test:
            _run(["-t", "nat", "-A", "POSTROUTING", *rule], binary="iptables")
    return {"pod_cidr": mine["pod_cidr"], "changes": changes}


# -- the rolling upgrade (orch.upgrade; day-2 reference D.2-D.4) -----------------------------

UPGRADE_NOTE = "kubeadm-upgrade-pending.json"
KUBERNETES_PACKAGES = ("kubeadm", "kubelet", "kubectl")
IMAGE_TAG_RE = re.compile(r"^\s*image:\s*\S+/kube-apiserver:(v[^\s\"']+)", re.M)


def manifest_version(kube_dir=None):
    """
    Return the version of this node's control-plane instance: the image tag of its
    kube-apiserver static Pod manifest (``v1.32.1``), what ``kubeadm upgrade apply`` and
    ``upgrade node`` move. None on a worker or a node kubeadm has not set up.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-*' kubeadm.manifest_version
    """
    path = os.path.join(_kube_dir(kube_dir), "manifests", "kube-apiserver.yaml")
    try:
        with salt.utils.files.fopen(path) as fh:
            found = IMAGE_TAG_RE.search(fh.read())
    except OSError:
        return None
    return found.group(1) if found else None


def cluster_version(kubeconfig=None):
    """
    Return the cluster's version as kubeadm stored it: ``kubernetesVersion`` of the
    ClusterConfiguration in ``kube-system/kubeadm-config`` (``upgrade apply`` rewrites it).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.cluster_version
    """
    out = _kubectl(["get", "configmap", "kubeadm-config", "-n", "kube-system", "-o",
                    "jsonpath={.data.ClusterConfiguration}"], kubeconfig)["stdout"]
    try:
        return (salt.utils.yaml.safe_load(out) or {}).get("kubernetesVersion")
    except (salt.utils.yaml.parser.ParserError, salt.utils.yaml.scanner.ScannerError,
            AttributeError) as exc:
        raise CommandExecutionError("kubeadm-config holds no ClusterConfiguration") from exc


def upgrade_apply(version, dry_run=False):
    """
    Upgrade the cluster's control plane to ``version`` from the first control plane
    (``kubeadm upgrade apply <version> --yes``): its own static Pods, the stored
    ClusterConfiguration, and the addons once no other control plane is older. The kubeadm
    package must already be at ``version``; kubeadm's version policy refuses a skipped
    minor or a downgrade (reference D.2.4).

    version
        ``v1.32.1``.

    dry_run
        ``--dry-run``: print what would change, change nothing.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.upgrade_apply v1.32.1
    """
    args = ["upgrade", "apply", str(version), "--yes"] + _flags([("--dry-run", dry_run or None)])
    try:
        return _run(args, stdin="")["stdout"]
    finally:
        _forget()


def upgrade_node(dry_run=False):
    """
    Upgrade this node to the version the cluster stores (``kubeadm upgrade node``): a
    control plane's static Pods and kubeconfigs, every node's kubelet configuration. Run
    after ``upgrade_apply`` on the first control plane, with the new kubeadm package.

    dry_run
        ``--dry-run``: print what would change, change nothing.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-worker-*' kubeadm.upgrade_node
    """
    args = ["upgrade", "node"] + _flags([("--dry-run", dry_run or None)])
    try:
        return _run(args, stdin="")["stdout"]
    finally:
        _forget()


def uncordon(node, kubeconfig=None):
    """
    Let ``node`` take Pods again (``kubectl uncordon``).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.uncordon k8s-worker-2
    """
    try:
        return _kubectl(["uncordon", node], kubeconfig)["stdout"]
    finally:
        _forget()


def package_versions():
    """
    Return the installed versions of the Kubernetes packages, as the system's package
    manager reports them: ``{"kubeadm": "1.32.1-1.1", "kubelet": ..., "kubectl": ...}``
    (None: not installed, or no package manager Salt knows).

    CLI Example:

    .. code-block:: bash

        salt '*' kubeadm.package_versions
    """
    if "pkg.version" not in __salt__:
        return dict.fromkeys(KUBERNETES_PACKAGES)
    found = __salt__["pkg.version"](*KUBERNETES_PACKAGES)
    return {name: found.get(name) or None for name in KUBERNETES_PACKAGES}


def upgrade_facts(kube_dir=None):
    """
    What orch.upgrade must know of this node before it changes anything:
    ``{"joined": kubeadm set the node up (see has_local_files), "kubeadm": the kubeadm
    command's version, "control_plane": the node runs a control-plane instance,
    "control_plane_version": its version (manifest_version), "packages": package_versions,
    "pillar": {"version", "package_version", "repo", "images"} of kubeadm in a freshly
    compiled pillar,
    "pending": the version of an upgrade that started here and has not finished,
    "pending_cordoned": whether the node was cordoned before that upgrade drained it}``.

    CLI Example:

    .. code-block:: bash

        salt '*' kubeadm.upgrade_facts
    """
    # Salt 3008 masks pillar values it returns unless asked; these three are not secret.
    pillar = __salt__["pillar.items"](unmask=True).get("kubeadm") or {}
    note = __utils__["kos_state.read_json"](
        __utils__["kos_state.state_file"](__salt__, UPGRADE_NOTE)) or {}
    try:
        kubeadm_version = version()
    except CommandExecutionError:
        kubeadm_version = None
    control_plane = manifest_version(kube_dir)
    return {
        "joined": has_local_files(kube_dir),
        "kubeadm": kubeadm_version,
        "control_plane": control_plane is not None,
        "control_plane_version": control_plane,
        "packages": package_versions(),
        "pillar": __utils__["kos_schema.plain"](
            {key: pillar.get(key) for key in ("version", "package_version", "repo", "images")}),
        "pending": note.get("version"),
        "pending_cordoned": bool(note.get("cordoned")),
    }


# -- etcd backups and restore (reference D.7) -------------------------------------------------

# etcdctl and etcdutl come from the etcd image this control plane runs (the manifest names
# it), mounted read-only for the call: the client matches the server, and nothing needs
# installing on either cloud.
ETCD_TOOLS_DIR = "usr/local/bin"
RESTORE_SUFFIX = ".kos-restore"
STOPPED_DIR = "kos-stopped-manifests"
RESTORE_STOPS = ("kube-apiserver.yaml", "etcd.yaml")
# What the Kubernetes documentation suggests for a restore into a cluster whose clients
# have watched newer revisions (etcd's revisions only grow).
RESTORE_REVISION_BUMP = 1000000000


def _static_pod(name, kube_dir=None):
    """The image and flags of this node's ``name`` static Pod (running or stopped aside)."""
    path = os.path.join(_kube_dir(kube_dir), "manifests", f"{name}.yaml")
    aside = os.path.join(_kube_dir(kube_dir), STOPPED_DIR, f"{name}.yaml")
    for candidate in (path, aside):
        if os.path.exists(candidate):
            with salt.utils.files.fopen(candidate) as fh:
                doc = salt.utils.yaml.safe_load(fh) or {}
            break
    else:
        raise CommandExecutionError(
            f"no {name} static Pod here ({path} is missing): etcd backups and restores run "
            "on control planes with stacked etcd")
    try:
        container = doc["spec"]["containers"][0]
    except (KeyError, IndexError, TypeError) as exc:
        raise CommandExecutionError(f"{path} has no container") from exc
    flags = dict(arg[2:].split("=", 1) for arg in container.get("command") or []
                 if arg.startswith("--") and "=" in arg)
    return container.get("image"), flags


def _api_port(kube_dir=None):
    return int(_static_pod("kube-apiserver", kube_dir)[1].get("secure-port", 6443))


class _EtcdTools:
    """The etcd image's root mounted read-only (``ctr images mount``) while in use."""

    def __init__(self, image):
        self.image = image
        self.root = None

    def __enter__(self):
        self.root = tempfile.mkdtemp(prefix="kos-etcd-tools-")
        try:
            _run(["-n", "k8s.io", "images", "mount", self.image, self.root], binary="ctr")
        except CommandExecutionError:
            os.rmdir(self.root)
            raise
        return self

    def __exit__(self, *exc):
        _run(["-n", "k8s.io", "images", "unmount", "--rm", self.root], binary="ctr")
        os.rmdir(self.root)

    def __call__(self, tool, args):
        return _run(args, binary=os.path.join(self.root, ETCD_TOOLS_DIR, tool))


def _etcd_ca_key(flags):
    """The etcd CA's private key beside its certificate: what seals and opens a backup."""
    return os.path.splitext(flags["trusted-ca-file"])[0] + ".key"


def _etcd_client(flags):
    """etcdctl's flags to reach this node's own member with its own certificate."""
    return ["--endpoints=https://127.0.0.1:2379", f"--cacert={flags['trusted-ca-file']}",
            f"--cert={flags['cert-file']}", f"--key={flags['key-file']}"]


def _member_list(tools, flags):
    out = tools("etcdctl", [*_etcd_client(flags), "member", "list", "--write-out=json"])["stdout"]
    try:
        members = json.loads(out).get("members") or []
    except (ValueError, AttributeError) as exc:
        raise CommandExecutionError("etcdctl member list printed no member list") from exc
    # etcdctl's JSON gives IDs as decimal numbers; member remove takes them in hex
    return [{"id": format(int(m["ID"]), "x"), "name": m.get("name") or "",
             "peer_urls": sorted(m.get("peerURLs") or [])} for m in members]


def etcd_member_list(kube_dir=None):
    """
    The members of the etcd cluster this control plane belongs to (``etcdctl member
    list``): each one's ID (hex), name (the node name kubeadm gave it; empty for a
    member added but never started) and peer URLs.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.etcd_member_list
    """
    image, flags = _static_pod("etcd", kube_dir)
    with _EtcdTools(image) as tools:
        return _member_list(tools, flags)


def etcd_member_remove(name, peer_url=None, kube_dir=None):
    """
    Remove from etcd, through this control plane, the member of node ``name`` (and one
    whose peer URL is ``peer_url``: a join that added its member but never started it
    left one without a name). For a control plane that is gone and cannot leave by
    itself (``kubeadm reset`` removes a live node's own member); never this node's own.
    Return the members removed.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.etcd_member_remove k8s-cp-3 peer_url=https://10.0.0.23:2380
    """
    image, flags = _static_pod("etcd", kube_dir)
    if name == flags.get("name"):
        raise CommandExecutionError(f"{name} is this node's own etcd member: remove it from "
                                    "another control plane")
    removed = []
    with _EtcdTools(image) as tools:
        for member in _member_list(tools, flags):
            if member["name"] == name or (peer_url and peer_url in member["peer_urls"]):
                tools("etcdctl", [*_etcd_client(flags), "member", "remove", member["id"]])
                removed.append(member)
    return removed


def _snapshot_status(tools, path):
    out = tools("etcdutl", ["snapshot", "status", path, "--write-out=json"])["stdout"]
    try:
        doc = json.loads(out)
    except ValueError as exc:
        raise CommandExecutionError(f"etcdutl printed no snapshot status for {path}") from exc
    return {"revision": doc.get("revision"), "keys": doc.get("totalKey"),
            "hash": doc.get("hash"), "size": doc.get("totalSize")}


def etcd_snapshot(directory, kube_dir=None):
    """
    Save a snapshot of this control plane's etcd member (``etcdctl snapshot save`` over
    ``https://127.0.0.1:2379`` with the member's own certificate) to
    ``<directory>/etcd-<node>-<UTC time>.db`` (mode 0600), check it (``etcdutl snapshot
    status``) and return its path, revision, key count, hash and the key that seals it
    (the etcd CA key, which only control planes hold).

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.etcd_snapshot /var/lib/kos/backups
    """
    image, flags = _static_pod("etcd", kube_dir)
    name = f"etcd-{flags.get('name', 'member')}-{__utils__['kos_backup.stamp']()}"
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, name + ".db")
    with _EtcdTools(image) as tools:
        old = os.umask(0o077)
        try:
            tools("etcdctl", [*_etcd_client(flags), "snapshot", "save", path])
        finally:
            os.umask(old)
        status = _snapshot_status(tools, path)
    return {"path": path, "name": name, "image": image, **status,
            "key_file": _etcd_ca_key(flags)}


def etcd_restore_stage(source, initial_cluster, token, saltenv="kos-backups", kube_dir=None):
    """
    Fetch the sealed backup ``source`` from the salt master (``salt://<name>`` in
    ``saltenv``), open it with this control plane's etcd CA key and restore it into
    ``<etcd data dir>.kos-restore`` for this member (its own ``--name`` and peer URL from
    the etcd manifest, the whole cluster's ``initial_cluster``, a ``token`` of this
    restore), ready to take the data directory's place; the running member is left alone
    and the opened snapshot removed. A staging left by an earlier try is replaced. Return
    the staging directory.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kubeadm.etcd_restore_stage salt://etcd-k8s-cp-1-20261127T180000Z.kosbak \\
            k8s-cp-1=https://10.0.0.20:2380 kos-restore-1
    """
    image, flags = _static_pod("etcd", kube_dir)
    data = flags["data-dir"].rstrip("/")
    staging = data + RESTORE_SUFFIX
    os.makedirs(os.path.dirname(data), exist_ok=True)
    work = tempfile.mkdtemp(prefix="kos-restore-", dir=os.path.dirname(data))
    try:
        snapshot = __utils__["kos_backup.fetch_opened"](
            __salt__, source, os.path.join(work, "snapshot.db"), _etcd_ca_key(flags), saltenv)
        shutil.rmtree(staging, ignore_errors=True)
        with _EtcdTools(image) as tools:
            tools("etcdutl", [
                "snapshot", "restore", snapshot, "--data-dir", staging,
                "--name", flags["name"], "--initial-cluster", initial_cluster,
                "--initial-cluster-token", token,
                "--initial-advertise-peer-urls", flags["initial-advertise-peer-urls"],
                # past every revision the API servers' and controllers' caches have seen,
                # and compacted there: they re-list instead of trusting what they hold
                "--bump-revision", str(RESTORE_REVISION_BUMP), "--mark-compacted"])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    os.chmod(staging, 0o700)
    return staging


def _listening(port, host="127.0.0.1"):
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False


def control_plane_stopped(timeout=180, kube_dir=None):
    """
    Stop this node's API server and etcd member for a restore: their manifests move to
    ``<kube_dir>/kos-stopped-manifests`` (the kubelet stops the Pods), then wait until
    neither port answers. Idempotent. Return the manifests moved now.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-*' kubeadm.control_plane_stopped
    """
    manifests = os.path.join(_kube_dir(kube_dir), "manifests")
    aside = os.path.join(_kube_dir(kube_dir), STOPPED_DIR)
    os.makedirs(aside, mode=0o700, exist_ok=True)
    moved = []
    for name in RESTORE_STOPS:
        if os.path.exists(os.path.join(manifests, name)):
            os.rename(os.path.join(manifests, name), os.path.join(aside, name))
            moved.append(name)
    api = _api_port(kube_dir)
    deadline = time.time() + float(timeout)
    while _listening(2379) or _listening(api):
        if time.time() >= deadline:
            raise CommandExecutionError(
                f"etcd or the API server still answers {timeout} s after their manifests left "
                f"{manifests}")
        time.sleep(2)
    return moved


def etcd_restore_swap(kube_dir=None):
    """
    Put the staged restore in the data directory's place (the old one kept as
    ``<data dir>.before-restore-<UTC time>``), with the member stopped. Nothing staged:
    nothing to do (done already). Return the kept directory or None.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-*' kubeadm.etcd_restore_swap
    """
    _, flags = _static_pod("etcd", kube_dir)
    if os.path.exists(os.path.join(_kube_dir(kube_dir), "manifests", "etcd.yaml")):
        raise CommandExecutionError("etcd still runs here: stop it first "
                                    "(kubeadm.control_plane_stopped)")
    data = flags["data-dir"].rstrip("/")
    staging = data + RESTORE_SUFFIX
    if not os.path.isdir(staging):
        return None
    kept = f"{data}.before-restore-{__utils__['kos_backup.stamp']()}"
    if os.path.exists(data):
        os.rename(data, kept)
    else:
        kept = None
    os.rename(staging, data)
    return kept


def control_plane_started(timeout=300, kube_dir=None):
    """
    Put back the manifests ``control_plane_stopped`` moved aside and wait until this
    node's API server answers again. Return the manifests put back.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-*' kubeadm.control_plane_started
    """
    manifests = os.path.join(_kube_dir(kube_dir), "manifests")
    aside = os.path.join(_kube_dir(kube_dir), STOPPED_DIR)
    back = []
    for name in RESTORE_STOPS[::-1]:
        if os.path.exists(os.path.join(aside, name)):
            os.rename(os.path.join(aside, name), os.path.join(manifests, name))
            back.append(name)
    if os.path.isdir(aside) and not os.listdir(aside):
        os.rmdir(aside)
    api = _api_port(kube_dir)
    deadline = time.time() + float(timeout)
    while not _listening(api):
        if time.time() >= deadline:
            raise CommandExecutionError(
                f"the API server does not answer {timeout} s after its manifest came back")
        time.sleep(2)
    return back
