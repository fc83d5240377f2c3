"""
The certificates of a MicroK8s control plane: the days left on each (``microk8s
refresh-certs --check``), the subject alternative names the API server certificate
carries, and ``microk8s refresh-certs --cert`` that regenerates one
(https://microk8s.io/docs/command-reference#heading--microk8s-refresh-certs).

:depends: the ``microk8s`` snap (``/snap/bin`` on PATH)
"""

import ipaddress
import os

import salt.utils.files
from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_microk8s

try:
    from cryptography import x509

    HAS_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - Salt's own packages ship it
    HAS_CRYPTOGRAPHY = False

__virtualname__ = "microk8s_certs"

# `refresh-certs --check`: "<sentence> N days." for each certificate, in this order.
CERT_CHECK_LINES = {
    "The CA certificate will expire in ": "ca.crt",
    "The server certificate will expire in ": "server.crt",
    "The front proxy client certificate will expire in ": "front-proxy-client.crt",
}


def __virtual__():
    return kos_microk8s.virtual(__virtualname__)


def refresh_certs(cert="server.crt"):
    """
    Regenerate a certificate (``microk8s refresh-certs --cert CERT``); for
    ``server.crt`` this re-renders ``csr.conf.template`` first, so added SANs land.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' microk8s_certs.refresh_certs
    """
    args = ["refresh-certs", "--cert", cert]
    return kos_microk8s.change(__salt__, __context__, args)["stdout"]


def certificates():
    """
    Return the days left on this control plane's certificates, as ``microk8s
    refresh-certs --check`` prints them: ``{"ca.crt": days, "server.crt": days,
    "front-proxy-client.crt": days}``, whole days, negative once expired. A worker holds
    none of them: ``{}``.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-*' microk8s_certs.certificates
    """
    out = kos_microk8s.run(__salt__, ["refresh-certs", "--check"])["stdout"]
    if out.startswith(kos_microk8s.WORKER_MESSAGE):
        return {}
    ret = {}
    for line in out.splitlines():
        for sentence, name in CERT_CHECK_LINES.items():
            if line.startswith(sentence):
                try:
                    ret[name] = int(line[len(sentence):].split()[0])
                except (IndexError, ValueError) as exc:
                    raise CommandExecutionError(f"unreadable refresh-certs line: {line!r}") from exc
    if len(ret) != len(CERT_CHECK_LINES):
        raise CommandExecutionError(f"microk8s refresh-certs --check printed: {out.strip()!r}")
    return ret


def server_sans(snap_data=None):
    """
    Return the subject alternative names the API server certificate carries now,
    ``{"ip": [...], "dns": [...]}`` (``server.crt``; what ``openssl x509 -ext
    subjectAltName`` shows). IPs are normalised (``2001:db8::1``), names lower-cased.

    CLI Example:

    .. code-block:: bash

        salt 'k8s-cp-1*' microk8s_certs.server_sans
    """
    if not HAS_CRYPTOGRAPHY:
        raise CommandExecutionError("microk8s_certs.server_sans needs the cryptography package")
    path = os.path.join(kos_microk8s.snap_data(__salt__, snap_data), "certs", "server.crt")
    try:
        with salt.utils.files.fopen(path, "rb") as fh:
            cert = x509.load_pem_x509_certificate(fh.read())
    except (OSError, ValueError) as exc:
        raise CommandExecutionError(f"cannot read {path}: {exc}") from exc
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return {"ip": [], "dns": []}
    return {
        "ip": [str(ipaddress.ip_address(ip)) for ip in ext.get_values_for_type(x509.IPAddress)],
        "dns": [name.lower() for name in ext.get_values_for_type(x509.DNSName)],
    }
