"""
What the execution modules of a kubeadm node share (``kubeadm``, ``kos_kubectl``,
``kos_certs``, ``kos_upgrade``, ``kos_podnet``, ``kos_etcd``): where kubeadm keeps this
node's files, and the text a failed command leaves once kubeadm's stack-trace hint and
every secret are out of it. Imported as plain Python; the callers
hand in their ``__salt__``.
"""

import os
import re

DEFAULT_KUBE_DIR = "/etc/kubernetes"
STACK_HINT = "To see the stack trace of this error execute with --v=5 or higher"
TOKEN_RE = re.compile(r"\b([a-z0-9]{6})\.[a-z0-9]{16}\b")
# A certificate key; a CA hash (sha256:<hex>) is public and stays readable in errors.
CERT_KEY_RE = re.compile(r"(?<!sha256:)\b[0-9a-f]{64}\b")


def default_kube_dir():
    """Where kubeadm keeps a node's files unless told otherwise."""
    return DEFAULT_KUBE_DIR


def kube_dir(salt, directory=None):
    """``directory`` when given, else the ``kubeadm:kube_dir`` setting (minion
    configuration, grains, then pillar, as ``config.get`` looks), else kubeadm's own."""
    return directory or salt["config.get"]("kubeadm:kube_dir", DEFAULT_KUBE_DIR)


def admin_conf(salt, kubeconfig=None, directory=None):
    """``kubeconfig`` when given, else the admin kubeconfig kubeadm wrote on this node."""
    return kubeconfig or os.path.join(kube_dir(salt, directory), "admin.conf")


def redact(text):
    """``text`` with every bootstrap token secret and certificate key replaced."""
    text = TOKEN_RE.sub(lambda m: f"{m.group(1)}.<redacted>", text or "")
    return CERT_KEY_RE.sub("<redacted>", text)


def is_token(text):
    """True when ``text`` is a whole bootstrap token (``id.secret``)."""
    return bool(TOKEN_RE.fullmatch(text))


def is_certificate_key(text):
    """True when ``text`` is a whole certificate key (64 hex digits)."""
    return bool(CERT_KEY_RE.fullmatch(text))


def message(res):
    """The command's own error text: stderr without kubeadm's stack-trace hint, redacted."""
    lines = [
        line for line in (res.get("stderr") or "").splitlines() if line.strip() != STACK_HINT
    ]
    text = "\n".join(lines).strip() or (res.get("stdout") or "").strip()
    return redact(text) or f"exit code {res.get('retcode')}"


def duration(value):
    """kubeadm and kubectl take Go durations; plain numbers mean seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{int(value)}s"
    return str(value)
