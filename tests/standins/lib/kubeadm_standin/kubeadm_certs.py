"""`kubeadm certs check-expiration` and `kubeadm certs renew`
(https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-certs/,
https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/cmd/certs.go).

Reads the real certificate files the stand-in's init and join wrote (and the client
certificates embedded in the kubeconfigs), and prints them the way kubeadm's text printer
does: one tabwriter for both tables, the last column `%-8v`, `!MISSING! <name>` and
empty cells for a file that is not there.
"""

import datetime
import os
import re
import subprocess

from . import common, env, gofmt, kubeconfig, pki
from .kubeadm_join import _upload_config_hint

KUBE_DIR = "/etc/kubernetes"
PKI_DIR = KUBE_DIR + "/pki"
DATE_FORMAT = "%b %d, %Y %H:%M UTC"  # Go's "Jan 02, 2006 15:04 MST" for a UTC time

# (name, file relative to /etc/kubernetes, its CA): the rows of check-expiration, in its fixed
# order.
CERTIFICATES = (
    ("admin.conf", "admin.conf", "ca"),
    ("apiserver", "pki/apiserver.crt", "ca"),
    ("apiserver-etcd-client", "pki/apiserver-etcd-client.crt", "etcd-ca"),
    ("apiserver-kubelet-client", "pki/apiserver-kubelet-client.crt", "ca"),
    ("controller-manager.conf", "controller-manager.conf", "ca"),
    ("etcd-healthcheck-client", "pki/etcd/healthcheck-client.crt", "etcd-ca"),
    ("etcd-peer", "pki/etcd/peer.crt", "etcd-ca"),
    ("etcd-server", "pki/etcd/server.crt", "etcd-ca"),
    ("front-proxy-client", "pki/front-proxy-client.crt", "front-proxy-ca"),
    ("scheduler.conf", "scheduler.conf", "ca"),
    ("super-admin.conf", "super-admin.conf", "ca"),
)
AUTHORITIES = (
    ("ca", "pki/ca"),
    ("etcd-ca", "pki/etcd/ca"),
    ("front-proxy-ca", "pki/front-proxy-ca"),
)
FALLBACK = ("[check-expiration] Error reading configuration from the Cluster. "
            "Falling back to default configuration")
# what `renew` prints for each certificate ("<long name> renewed"), in check-expiration's order.
LONG_NAMES = {
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
DONE = ("Done renewing certificates. You must restart the kube-apiserver, "
        "kube-controller-manager, kube-scheduler and etcd, so that they can use the new "
        "certificates.")


def _path(relative):
    return env.host(os.path.join(KUBE_DIR, relative))


def _pem(relative):
    """The certificate's PEM, or None when the file (or its embedded certificate) is absent."""
    path = _path(relative)
    if not os.path.exists(path):
        return None
    if relative.endswith(".conf"):
        return kubeconfig.load(os.path.join(KUBE_DIR, relative)).cert_pem
    with open(path, "rb") as f:
        return f.read()


def not_after(pem):
    out = subprocess.run(["openssl", "x509", "-noout", "-enddate"], input=pem,
                         capture_output=True, check=True).stdout.decode()
    # notAfter=Jan 23 10:41:00 2027 GMT
    text = " ".join(out.strip().split("=", 1)[1].split())
    return datetime.datetime.strptime(text, "%b %d %H:%M:%S %Y GMT").replace(
        tzinfo=datetime.timezone.utc)


def _row(end, now):
    return end.strftime(DATE_FORMAT), gofmt.short_human_duration((end - now).total_seconds())


def _yes_no(flag):
    return "%-8s" % ("yes" if flag else "no")


def _api_config_readable(kubeconfig_path):
    try:
        _, api = common.admin_api(kubeconfig_path, timeout=5.0)
        api.get("/api/v1/namespaces/kube-system/configmaps/kubeadm-config")
        return True
    except Exception:  # noqa: BLE001 - whatever failed, kubeadm falls back and goes on
        return False


def _reading(prefix, kubeconfig_path):
    """The configuration lines both commands print first (and a blank line)."""
    if _api_config_readable(kubeconfig_path):
        _upload_config_hint(prefix.strip("[]"))
    else:
        env.out(FALLBACK.replace("[check-expiration]", prefix))
    env.out()


def cmd_check_expiration(args, parse_for):
    values, _, _ = parse_for(["certs", "check-expiration"], args)
    if values["output"] not in ("", "text"):
        raise common.Failure("the stand-in prints kubeadm's text output only (-o text)")
    now = datetime.datetime.now(datetime.timezone.utc)
    _reading("[check-expiration]", values["kubeconfig"] or KUBE_DIR + "/admin.conf")
    ca_external = {name: not os.path.exists(_path(base + ".key")) for name, base in AUTHORITIES}
    lines = ["CERTIFICATE\tEXPIRES\tRESIDUAL TIME\tCERTIFICATE AUTHORITY\tEXTERNALLY MANAGED"]
    for name, relative, ca in CERTIFICATES:
        pem = _pem(relative)
        if not pem:
            lines.append("!MISSING! %s\t\t\t\t" % name)
            continue
        expires, residual = _row(not_after(pem), now)
        lines.append("%s\t%s\t%s\t%s\t%s" % (name, expires, residual, ca, _yes_no(ca_external[ca])))
    lines += ["", "CERTIFICATE AUTHORITY\tEXPIRES\tRESIDUAL TIME\tEXTERNALLY MANAGED"]
    for name, base in AUTHORITIES:
        pem = _pem(base + ".crt")
        if not pem:
            lines.append("!MISSING! %s\t\t\t" % name)
            continue
        expires, residual = _row(not_after(pem), now)
        lines.append("%s\t%s\t%s\t%s" % (name, expires, residual, _yes_no(ca_external[name])))
    env.out(gofmt.tabwrite("\n".join(lines) + "\n", 10, 4, 3).rstrip("\n"))


def _subject_orgs(pem):
    text = pki._openssl(["x509", "-noout", "-subject", "-nameopt", "RFC2253"], pem).decode()
    subject = text.strip().split("=", 1)[1] if "=" in text else ""
    return re.findall(r"(?:^|,)O=([^,]+)", subject)


def _usages(pem):
    try:
        text = pki._openssl(["x509", "-noout", "-ext", "extendedKeyUsage"], pem).decode()
    except pki.PKIError:
        return False, False
    return "Server Authentication" in text, "Client Authentication" in text


def _renew(name, relative, ca):
    """A new key and certificate for ``name``, with the old one's subject, SANs and usages,
    signed by its CA for a year; a kubeconfig keeps everything but its client credential."""
    ca_base = _path(dict(AUTHORITIES)[ca])
    old = _pem(relative)
    cn = pki.cert_subject_cn(old).strip()
    orgs = _subject_orgs(old)
    server, client = _usages(old)
    dns, ips = pki.cert_sans(old)
    path = _path(relative)
    if relative.endswith(".conf"):
        kc = kubeconfig.load(os.path.join(KUBE_DIR, relative))
        cert, key = pki.signed_cert(ca_base + ".crt", ca_base + ".key", cn, orgs, 365,
                                    client=True, algorithm=pki.key_algorithm(kc.key_pem or b""))
        text = kubeconfig.render(kc.server, kc.ca_pem, cn, kc.cluster_name, cert, key)
        pki.write_file(path, text, 0o600)
        return
    key_path = path[:-len(".crt")] + ".key"
    with open(key_path, "rb") as f:
        algorithm = pki.key_algorithm(f.read())
    cert, key = pki.signed_cert(ca_base + ".crt", ca_base + ".key", cn, orgs, 365,
                                server=server, client=client, dns=dns, ips=ips,
                                algorithm=algorithm)
    pki.write_pair(path, key_path, cert, key)


def cmd_renew(which, args, parse_for):
    values, _, _ = parse_for(["certs", "renew", which], args)
    _reading("[renew]", values["kubeconfig"] or KUBE_DIR + "/admin.conf")
    rows = CERTIFICATES if which == "all" else [r for r in CERTIFICATES if r[0] == which]
    for name, relative, ca in rows:
        long_name = LONG_NAMES[name]
        if not _pem(relative):
            env.out("MISSING! %s" % long_name)
            continue
        if not os.path.exists(_path(dict(AUTHORITIES)[ca] + ".key")):
            env.out("Detected external %s, %s can't be renewed" % (ca, long_name))
            continue
        try:
            _renew(name, relative, ca)
        except (pki.PKIError, OSError) as e:
            raise common.Failure("failed to renew certificate %s: %s" % (name, e))
        env.out("%s renewed" % long_name)
    if which == "all":
        env.out()
        env.out(DONE)
