"""
Issue and revoke what a node needs to join a kubeadm cluster, on a control plane of it:
bootstrap tokens (``kubeadm token``), the certificate key that decrypts the uploaded
control-plane certificates (``kubeadm init phase upload-certs``) and the CA hash that pins
the cluster CA. Membership itself (``init``, ``join``, ``reset``) is the ``kubeadm``
module's; the ``kubeadm_join`` states issue and revoke each node's credential with these.

Tokens and certificate keys never reach the minion log: every command whose output
carries one runs with ``output_loglevel="quiet"``, and a key is never passed on a command
line except where the operator asks for it (``join_command``).

:depends: ``kubeadm`` on PATH; ``cryptography`` (ships with Salt)
"""

import datetime
import hashlib
import os
import re

import salt.utils.files
from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_cli, kos_kubeadm

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    HAS_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - Salt's own packages ship it
    HAS_CRYPTOGRAPHY = False

__virtualname__ = "kos_join"

# Description kubeadm gives the hidden token whose expiry drives the kubeadm-certs Secret
# (https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/phases/copycerts/copycerts.go).
CERT_TOKEN_DESCRIPTION = "Proxy for managing TTL for the kubeadm-certs secret"
# One `kubeadm token list` row: the description is the only field that may hold spaces.
TOKEN_ROW_RE = re.compile(
    r"^(?P<token>[a-z0-9]{6}\.[a-z0-9]{16})\s+(?P<ttl>\S+)\s+(?P<expires>\S+)\s+"
    r"(?P<usages>\S+)\s+(?P<description>.*?)\s+(?P<groups>\S+)\s*$"
)


def __virtual__():
    return kos_cli.virtual(__virtualname__, "kubeadm", "are the packages installed?")


def _run(args):
    """``kubeadm <args>``, its output kept out of the log (it carries tokens and keys)."""
    return kos_cli.run(__salt__, ["kubeadm", *args], secret=True, describe=kos_kubeadm.message)


def _forget():
    # the token list changed
    kos_cli.forget(__context__, __virtualname__)


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

        salt 'k8s-cp-1*' kos_join.upload_certs
    """
    args = ["init", "phase", "upload-certs", "--upload-certs"]
    args += kos_cli.flags([("--config", config)], joined=True)
    try:
        out = _run(args)["stdout"]
    finally:
        _forget()
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    if not lines or not kos_kubeadm.is_certificate_key(lines[-1]):
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

        salt 'k8s-cp-1*' kos_join.token_create ttl=3600 description='kos join wave'
    """
    args = ["token", "create"]
    # 0 stays a TTL: kubeadm reads it as "never expires"
    args += kos_cli.flags(
        [
            ("--ttl", None if ttl is None else kos_kubeadm.duration(ttl)),
            ("--description", description),
            ("--usages", usages),
            ("--groups", groups),
        ],
        joined=True,
    )
    try:
        token = _run(args)["stdout"].strip()
    finally:
        _forget()
    if not kos_kubeadm.is_token(token):
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

        salt 'k8s-cp-1*' kos_join.token_list
    """
    key = f"{__virtualname__}.token_list"
    if key in __context__:
        return __context__[key]
    out = _run(["token", "list"])["stdout"]
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


def token_delete(token):
    """
    Delete a bootstrap token (``kubeadm token delete``) by ID or full token.
    Deleting the token that owns the ``kubeadm-certs`` Secret removes the Secret too.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_join.token_delete abcdef
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

        salt 'k8s-cp-1*' kos_join.join_command ttl=900
    """
    args = ["token", "create", "--print-join-command"]
    args += kos_cli.flags(
        [
            ("--ttl", None if ttl is None else kos_kubeadm.duration(ttl)),
            ("--certificate-key", certificate_key),
        ],
        joined=True,
    )
    try:
        words = _run(args)["stdout"].split()
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

        salt 'k8s-cp-1*' kos_join.ca_cert_hash
    """
    if not HAS_CRYPTOGRAPHY:
        raise CommandExecutionError("kos_join.ca_cert_hash needs the cryptography package")
    path = ca_file or os.path.join(kos_kubeadm.kube_dir(__salt__), "pki", "ca.crt")
    try:
        with salt.utils.files.fopen(path, "rb") as fh:
            cert = x509.load_pem_x509_certificate(fh.read())
    except (OSError, ValueError) as exc:
        raise CommandExecutionError(f"cannot read the CA certificate {path}: {exc}") from exc
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return "sha256:" + hashlib.sha256(spki).hexdigest()
