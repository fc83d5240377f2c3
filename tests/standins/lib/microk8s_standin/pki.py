"""Certificates made with the openssl CLI, as produce_certs/gen_server_cert do
(https://github.com/canonical/microk8s/blob/master/microk8s-resources/actions/common/utils.sh)."""

import base64
import datetime
import hashlib
import os
import re
import ssl
import subprocess

from . import common, netinfo

# Shipped microk8s-resources/certs/csr.conf.template, byte for byte:
# https://github.com/canonical/microk8s/blob/master/microk8s-resources/certs/csr.conf.template
CSR_CONF_TEMPLATE = """[ req ]
default_bits = 2048
prompt = no
default_md = sha256
req_extensions = req_ext
distinguished_name = dn

[ dn ]
C = GB
ST = Canonical
L = Canonical
O = Canonical
OU = Canonical
CN = 127.0.0.1

[ req_ext ]
subjectAltName = @alt_names

[ alt_names ]
DNS.1 = kubernetes
DNS.2 = kubernetes.default
DNS.3 = kubernetes.default.svc
DNS.4 = kubernetes.default.svc.cluster
DNS.5 = kubernetes.default.svc.cluster.local
IP.1 = 127.0.0.1
IP.2 = 10.152.183.1
#MOREIPS

[ v3_ext ]
authorityKeyIdentifier=keyid,issuer:always
basicConstraints=CA:FALSE
keyUsage=keyEncipherment,dataEncipherment,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=@alt_names
"""


def certs(*parts):
    return common.data("certs", *parts)


def openssl(*args, show_stderr=False):
    subprocess.run(
        ["openssl", *args],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=None if show_stderr else subprocess.DEVNULL,
    )


def _genrsa_async(path):
    return subprocess.Popen(
        ["openssl", "genrsa", "-out", path, "2048"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _wait(procs):
    for p in procs:
        if p.wait() != 0:
            raise subprocess.CalledProcessError(p.returncode, p.args)


def _genec(path):
    # EC keys for certificates nothing inspects: RSA key generation is what makes installs slow.
    openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", path)


def render_csr_conf(template, ips):
    """utils.sh render_csr_conf: replace #MOREIPS with `IP.n = addr` lines, n from 3, skipping
    ids `grep '^IP.<n>'` finds in the template."""
    if not ips or ips == ["127.0.0.1"]:
        return template.replace("#MOREIPS", "")
    entries, i = [], 3
    for addr in ips:
        while re.search(r"^IP.{}".format(i), template, flags=re.M):
            i += 1
        entries.append("IP.{} = {}".format(i, addr))
        i += 1
    return template.replace("#MOREIPS", "\n".join(entries))


def refresh_csr_conf():
    template = common.read_file(certs("csr.conf.template"), CSR_CONF_TEMPLATE)
    rendered = render_csr_conf(template, netinfo.all_ips())
    common.write_file(certs("csr.conf.rendered"), rendered)
    common.write_file(certs("csr.conf"), rendered)


def gen_ca():
    p = _genrsa_async(certs("ca.key"))
    _wait([p])
    _sign_ca()


def _sign_ca():
    openssl(
        "req", "-x509", "-new", "-sha256", "-nodes", "-days", "3650",
        "-key", certs("ca.key"), "-subj", "/CN=10.152.183.1", "-out", certs("ca.crt"),
    )


def gen_server_cert(show_stderr=False):
    """gen_server_cert: new CSR from csr.conf with the existing key, signed by the cluster CA."""
    # openssl's complaints reach the terminal from both steps (a bad SAN fails the first:
    # "bad ip address ... value=<san>", refresh-certs then exits 20)
    openssl(
        "req", "-new", "-sha256", "-key", certs("server.key"), "-out", certs("server.csr"),
        "-config", certs("csr.conf"), show_stderr=show_stderr,
    )
    openssl(
        "x509", "-req", "-sha256", "-in", certs("server.csr"), "-CA", certs("ca.crt"),
        "-CAkey", certs("ca.key"), "-CAcreateserial", "-out", certs("server.crt"),
        "-days", "365", "-extensions", "v3_ext", "-extfile", certs("csr.conf"),
        show_stderr=show_stderr,
    )


def gen_front_proxy(show_stderr=False, new_ca=True):
    if new_ca or not os.path.exists(certs("front-proxy-ca.key")):
        _genec(certs("front-proxy-ca.key"))
        openssl(
            "req", "-x509", "-new", "-sha256", "-nodes", "-days", "3650",
            "-key", certs("front-proxy-ca.key"), "-subj", "/CN=front-proxy-ca",
            "-out", certs("front-proxy-ca.crt"),
        )
    if not os.path.exists(certs("front-proxy-client.key")):
        _genec(certs("front-proxy-client.key"))
    openssl(
        "req", "-new", "-sha256", "-key", certs("front-proxy-client.key"),
        "-out", certs("front-proxy-client.csr"), "-subj", "/CN=front-proxy-client",
    )
    openssl(
        "x509", "-req", "-sha256", "-in", certs("front-proxy-client.csr"),
        "-CA", certs("front-proxy-ca.crt"), "-CAkey", certs("front-proxy-ca.key"),
        "-CAcreateserial", "-out", certs("front-proxy-client.crt"), "-days", "365",
        show_stderr=show_stderr,
    )


def gen_admin_cert():
    _genec(certs("admin.key"))
    openssl(
        "req", "-new", "-sha256", "-key", certs("admin.key"), "-out", certs("admin.csr"),
        "-subj", "/CN=admin/O=system:masters",
    )
    openssl(
        "x509", "-req", "-sha256", "-in", certs("admin.csr"), "-CA", certs("ca.crt"),
        "-CAkey", certs("ca.key"), "-CAcreateserial", "-out", certs("admin.crt"), "-days", "3650",
    )


def produce_certs():
    """Install-time PKI: cluster CA, server cert with host SANs, front proxy, admin, SA key."""
    os.makedirs(certs(), exist_ok=True)
    common.write_file(certs("csr.conf.template"), CSR_CONF_TEMPLATE)
    refresh_csr_conf()
    _wait([_genrsa_async(certs("ca.key")), _genrsa_async(certs("server.key"))])
    _sign_ca()
    gen_server_cert()
    gen_front_proxy()
    gen_admin_cert()
    _genec(certs("serviceaccount.key"))


def gen_dqlite_cert(backend_dir, hostname):
    openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-sha256", "-days", "3650", "-nodes",
        "-keyout", os.path.join(backend_dir, "cluster.key"),
        "-out", os.path.join(backend_dir, "cluster.crt"),
        "-subj", "/CN=k8s",
        "-addext", "subjectAltName=DNS:{},IP:127.0.0.1".format(hostname),
    )


def der_sha256(cert_path):
    with open(cert_path) as f:
        der = ssl.PEM_cert_to_DER_cert(f.read())
    return hashlib.sha256(der).hexdigest()


def server_cert_check():
    """utils.sh server_cert_check: first 12 hex chars of sha256 over the DER server.crt."""
    return der_sha256(certs("server.crt"))[:12]


def ca_fingerprint():
    """Shared secret-ish identity of a cluster for the stand-in's internal endpoints."""
    path = certs("ca.remote.crt") if os.path.exists(common.lock("clustered.lock")) else certs("ca.crt")
    return der_sha256(path)


def b64_file(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def ca_subject():
    out = subprocess.run(
        ["openssl", "x509", "-noout", "-subject", "-in", certs("ca.crt")],
        capture_output=True, text=True, check=False,
    )
    return out.stdout


def expiry_days(cert_path):
    out = subprocess.run(
        ["openssl", "x509", "-enddate", "-noout", "-in", cert_path],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    stamp = out.split("=", 1)[1]
    end = datetime.datetime.strptime(" ".join(stamp.split()[:4]), "%b %d %H:%M:%S %Y")
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    return (end - now).days
