"""
The certificates kubeadm made for a control plane: what ``kubeadm certs check-expiration``
reports, ``kubeadm certs renew``, and the restart of the static control-plane Pods that
makes them load renewed ones, as
https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-certs/ ("Check
certificate expiration", "Manual certificate renewal") describes.

:depends: ``kubeadm`` and ``kubectl`` on PATH
"""

import datetime
import math
import os
import re
import tempfile
import time

from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_cli, kos_kubeadm

__virtualname__ = "kos_certs"

# A row of either table of ``kubeadm certs check-expiration`` (printed by
# https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/cmd/certs.go):
# the date is "Jan 02, 2006 15:04 UTC", the residual time one word, a CA column only in
# the first.
EXPIRY_ROW_RE = re.compile(
    r"^(?P<name>\S+)\s+(?P<expires>[A-Z][a-z]{2} \d{2}, \d{4} \d{2}:\d{2}) UTC\s+\S+\s+"
    r"(?:(?P<authority>\S+)\s+)?(?P<external>yes|no)\s*$"
)
EXPIRY_FORMAT = "%b %d, %Y %H:%M"
# What `kubeadm certs renew` prints for each certificate it renewed: "<long> renewed", the
# long name being the one its subcommand's help gives ("Renew the <long>", listed in
# https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-certs/).
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


def __virtual__():
    return kos_cli.virtual(
        __virtualname__, "kubeadm", "are the packages installed?"
    )


def _kube_dir(kube_dir=None):
    return kos_kubeadm.kube_dir(__salt__, kube_dir)


def _run(args):
    return kos_cli.run(
        __salt__, ["kubeadm", *args], describe=kos_kubeadm.message)


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
    Return what ``kubeadm certs check-expiration`` reports on this control plane:
    ``{"certificates": {name: entry}, "authorities": {name: entry}}``,
    ``entry`` being ``{"expires": unix time, "days": whole days left (negative once
    expired), "authority": its CA (certificates only), "externally_managed": bool}``, or
    None for a file kubeadm reports missing. kubeadm reports and changes nothing, also
    when a certificate has expired; ``kubelet.conf`` rotates by itself and is not listed.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-*' kos_certs.certificates
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
    if not kube_dir and _kube_dir() == kos_kubeadm.default_kube_dir():
        return []
    base = _kube_dir(kube_dir)
    return ["--cert-dir", os.path.join(base, "pki"), "--kubeconfig", os.path.join(base, "admin.conf")]


def renew_certificates(name="all", kube_dir=None):
    """
    Renew this control plane's certificates (``kubeadm certs renew NAME``,
    https://kubernetes.io/docs/reference/setup-tools/kubeadm/generated/kubeadm_certs_renew_all/):
    every leaf of ``certificates`` with ``all``, its subject and SANs kept, a
    year more; the CAs never. Return the names kubeadm said it renewed. The running
    control-plane components keep the old certificates until they restart
    (``restart_control_plane``); run it on each control plane.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_certs.renew_certificates
    """
    out = _run(["certs", "renew", name, *_cert_args(kube_dir)])["stdout"]
    long_names = {long: short for short, long in RENEW_LONG_NAMES.items()}
    return [long_names[line[: -len(" renewed")]] for line in out.splitlines()
            if line.endswith(" renewed") and line[: -len(" renewed")] in long_names]


def restart_control_plane(wait=20, timeout=120, kube_dir=None):
    """
    Restart this node's static control-plane Pods so they load renewed certificates: all
    their manifests leave ``<kube_dir>/manifests`` together for ``wait`` seconds (the
    kubelet stops every Pod, etcd and the API server included) and come back (it starts
    them again), as the kubeadm documentation describes;
    then wait up to ``timeout`` seconds for the API. Return the manifests moved.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' kos_certs.restart_control_plane
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
    admin = os.path.join(_kube_dir(kube_dir), "admin.conf")
    if not __salt__["kos_kubectl.api_ready"](timeout=timeout, kubeconfig=admin):
        raise CommandExecutionError(
            f"the API did not answer within {timeout} s after the control plane restarted")
    return names
