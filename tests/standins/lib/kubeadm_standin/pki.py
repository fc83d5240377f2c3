"""Certificates through the `openssl` command (no `cryptography` in Debian's system python).

Key and certificate shapes follow kubeadm: CAs valid 10 years, leaves 1 year, RSA keys in
PKCS#1 ("RSA PRIVATE KEY") and EC keys in SEC1 ("EC PRIVATE KEY") form, the algorithm
taken from ClusterConfiguration.encryptionAlgorithm (v1beta4).
"""

import base64
import concurrent.futures
import hashlib
import ipaddress
import os
import random
import re
import subprocess
import tempfile


class PKIError(RuntimeError):
    pass


ALGORITHMS = ("RSA-2048", "RSA-3072", "RSA-4096", "ECDSA-P256", "ECDSA-P384")


def _openssl(args, input_bytes=None):
    try:
        proc = subprocess.run(["openssl"] + args, input=input_bytes, capture_output=True,
                              timeout=60)
    except FileNotFoundError:
        raise PKIError("openssl not found in PATH")
    if proc.returncode != 0:
        raise PKIError("openssl %s failed: %s" % (args[0], proc.stderr.decode(errors="replace")))
    return proc.stdout


def _write(path, data, mode=0o600):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp%d" % os.getpid()
    with open(tmp, "wb") as f:
        f.write(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def gen_key(algorithm="RSA-2048"):
    """A new private key in kubeadm's PEM form."""
    algorithm = algorithm or "RSA-2048"
    if algorithm.startswith("ECDSA"):
        curve = "secp384r1" if algorithm == "ECDSA-P384" else "prime256v1"
        return _openssl(["ecparam", "-name", curve, "-genkey", "-noout"])
    bits = algorithm.split("-")[1] if "-" in algorithm else "2048"
    return _openssl(["genrsa", "-traditional", bits])


def _ext_config(lines):
    text = "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\n[ext]\n" + "\n".join(lines) + "\n"
    fd, path = tempfile.mkstemp(prefix="kos-standin-ossl-", suffix=".cnf")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def _subject(cn, orgs=()):
    parts = ["/O=%s" % o for o in orgs] + ["/CN=%s" % cn]
    return "".join(p.replace(",", "\\,") for p in parts)


def san_line(dns=(), ips=()):
    entries = ["DNS:%s" % d for d in dns] + ["IP:%s" % i for i in ips]
    return "subjectAltName = " + ",".join(entries) if entries else None


def _with_key_file(key_pem, fn):
    fd, path = tempfile.mkstemp(prefix="kos-standin-key-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(key_pem)
        return fn(path)
    finally:
        os.unlink(path)


def self_signed_ca(cn, days=3650, algorithm="RSA-2048"):
    """(cert_pem, key_pem) of a CA like kubeadm's (CN, SAN DNS:<cn>, keyCertSign)."""
    key = gen_key(algorithm)
    cfg = _ext_config([
        "basicConstraints = critical,CA:TRUE",
        "keyUsage = critical,digitalSignature,keyEncipherment,keyCertSign",
        "subjectKeyIdentifier = hash",
        "subjectAltName = DNS:%s" % cn,
    ])
    try:
        cert = _with_key_file(key, lambda kp: _openssl([
            "req", "-x509", "-new", "-key", kp, "-subj", _subject(cn), "-days", str(int(days)),
            "-sha256", "-config", cfg, "-extensions", "ext",
            "-set_serial", str(random.getrandbits(62))]))
    finally:
        os.unlink(cfg)
    return cert, key


def signed_cert(ca_cert_path, ca_key_path, cn, orgs=(), days=365, server=False, client=False,
                dns=(), ips=(), algorithm="RSA-2048"):
    """(cert_pem, key_pem) of a leaf signed by the CA at the given paths."""
    key = gen_key(algorithm)
    usages = []
    if server:
        usages.append("serverAuth")
    if client:
        usages.append("clientAuth")
    lines = [
        "basicConstraints = critical,CA:FALSE",
        "keyUsage = critical,digitalSignature,keyEncipherment",
        "authorityKeyIdentifier = keyid",
    ]
    if usages:
        lines.append("extendedKeyUsage = " + ",".join(usages))
    san = san_line(dns, ips)
    if san:
        lines.append(san)
    cfg = _ext_config(lines)
    try:
        cert = _with_key_file(key, lambda kp: _openssl([
            "req", "-x509", "-new", "-key", kp, "-subj", _subject(cn, orgs),
            "-days", str(int(days)), "-sha256", "-CA", ca_cert_path, "-CAkey", ca_key_path,
            "-config", cfg, "-extensions", "ext", "-set_serial", str(random.getrandbits(62))]))
    finally:
        os.unlink(cfg)
    return cert, key


def make_csr(key_pem, cn, orgs=()):
    return _with_key_file(key_pem, lambda kp: _openssl(
        ["req", "-new", "-key", kp, "-subj", _subject(cn, orgs)]))


def csr_subject(csr_pem):
    text = _openssl(["req", "-noout", "-subject", "-nameopt", "RFC2253"], csr_pem).decode()
    return text.strip().split("=", 1)[1] if "=" in text else ""


def sign_csr(csr_pem, ca_cert_path, ca_key_path, days=365, server=False, client=True):
    usages = (["serverAuth"] if server else []) + (["clientAuth"] if client else [])
    cfg = _ext_config([
        "basicConstraints = critical,CA:FALSE",
        "keyUsage = critical,digitalSignature,keyEncipherment",
        "extendedKeyUsage = " + ",".join(usages),
        "authorityKeyIdentifier = keyid",
    ])
    try:
        return _openssl(["x509", "-req", "-CA", ca_cert_path, "-CAkey", ca_key_path,
                         "-days", str(int(days)), "-sha256", "-extfile", cfg,
                         "-extensions", "ext", "-set_serial", str(random.getrandbits(62))],
                        csr_pem)
    finally:
        os.unlink(cfg)


def public_key_pem(key_pem):
    return _openssl(["pkey", "-pubout"], key_pem)


def ca_cert_hash(cert_pem):
    """`sha256:<hex>` over the DER SubjectPublicKeyInfo of `cert_pem` (kubeadm pubkeypin.Hash,
    https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/util/pubkeypin/pubkeypin.go).

    `openssl pkey` rather than `openssl rsa`, which yields nothing for an ECDSA key.
    """
    pub_pem = _openssl(["x509", "-noout", "-pubkey"], cert_pem)
    der = _openssl(["pkey", "-pubin", "-outform", "der"], pub_pem)
    if not der:
        raise PKIError("empty SubjectPublicKeyInfo")
    return "sha256:" + hashlib.sha256(der).hexdigest()


def cert_sans(cert_pem):
    """(dns_names, ip_strings) of a certificate, in certificate order."""
    try:
        text = _openssl(["x509", "-noout", "-ext", "subjectAltName"], cert_pem).decode()
    except PKIError:
        return [], []
    dns, ips = [], []
    for entry in re.findall(r"(DNS|IP Address):([^,\s]+)", text):
        (dns if entry[0] == "DNS" else ips).append(entry[1])
    return dns, ips


def cert_subject_cn(cert_pem):
    text = _openssl(["x509", "-noout", "-subject", "-nameopt", "RFC2253"], cert_pem).decode()
    m = re.search(r"CN=([^,]+)", text)
    return m.group(1) if m else ""


def key_algorithm(key_pem):
    return "ECDSA-P256" if b"EC PRIVATE KEY" in key_pem else "RSA-2048"


def write_pair(cert_path, key_path, cert_pem, key_pem):
    _write(cert_path, cert_pem, 0o644)
    _write(key_path, key_pem, 0o600)


def write_file(path, data, mode=0o644):
    if isinstance(data, str):
        data = data.encode()
    _write(path, data, mode)


def b64(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode()


def parallel(jobs):
    """Run callables concurrently (openssl RSA key generation dominates init time)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as ex:
        futures = [ex.submit(j) for j in jobs]
        return [f.result() for f in futures]


def sorted_dns(names):
    """kubeadm's RemoveDuplicateAltNames: DNS names deduplicated and sorted."""
    return sorted(set(n for n in names if n))


def dedup_ips(ips):
    """IPs deduplicated in insertion order (also RemoveDuplicateAltNames)."""
    seen, out = set(), []
    for ip in ips:
        try:
            norm = str(ipaddress.ip_address(ip))
        except ValueError:
            continue
        if norm not in seen:
            seen.add(norm)
            out.append(norm)
    return out


def is_ip(text):
    try:
        ipaddress.ip_address(text)
        return True
    except ValueError:
        return False


# ---------------------------------------------------------------------------
# kubeadm-certs Secret encryption.
#
# kubeadm encrypts the shared certificates with AES-GCM under the certificate key.  The
# standard library has no AES, so the stand-in uses a SHA-256 keystream with an HMAC tag:
# what matters for callers is that a wrong key fails authentication like GCM does.

import hmac  # noqa: E402


def _keystream(key, nonce, length):
    out = b""
    counter = 0
    while len(out) < length:
        out += hashlib.sha256(key + nonce + counter.to_bytes(8, "big")).digest()
        counter += 1
    return out[:length]


def encrypt(key, plaintext):
    nonce = os.urandom(12)
    stream = _keystream(key, nonce, len(plaintext))
    ct = bytes(a ^ b for a, b in zip(plaintext, stream))
    tag = hmac.new(key, nonce + ct, hashlib.sha256).digest()[:16]
    return base64.b64encode(nonce + ct + tag).decode()


class AuthError(ValueError):
    pass


def decrypt(key, blob):
    raw = base64.b64decode(blob)
    nonce, ct, tag = raw[:12], raw[12:-16], raw[-16:]
    if not hmac.compare_digest(hmac.new(key, nonce + ct, hashlib.sha256).digest()[:16], tag):
        raise AuthError("cipher: message authentication failed")
    stream = _keystream(key, nonce, len(ct))
    return bytes(a ^ b for a, b in zip(ct, stream))
