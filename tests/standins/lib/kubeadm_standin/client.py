"""HTTPS client for the stand-in API server, reporting failures the way Go's client does.

Errors read like client-go's: `Get "https://10.0.0.10:6443/api/v1/...?timeout=10s": dial tcp
10.0.0.10:6443: connect: connection refused`, because kubeadm and kubectl embed them in
their own messages (token discovery does:
https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/discovery/token/token.go).
"""

import errno
import http.client
import json
import os
import socket
import ssl
import tempfile
import urllib.parse

from . import pki


class ClientError(Exception):
    """Transport-level failure; `str()` is the Go-style text."""

    def __init__(self, text, kind="other"):
        Exception.__init__(self, text)
        self.text = text
        self.kind = kind


class HTTPError(Exception):
    """The server answered with a metav1.Status failure."""

    def __init__(self, code, status):
        self.code = code
        self.status = status if isinstance(status, dict) else {}
        self.reason = self.status.get("reason", "")
        self.message = self.status.get("message", "the server returned %d" % code)
        Exception.__init__(self, self.message)


def split_host_port(hostport):
    if hostport.startswith("["):
        h, _, p = hostport[1:].partition("]")
        return h, int(p.lstrip(":") or 443)
    if hostport.count(":") == 1:
        h, p = hostport.split(":")
        return h, int(p)
    return hostport, 443


def _go_verb(method):
    return method[0] + method[1:].lower()


def _tmpfile(data):
    fd, path = tempfile.mkstemp(prefix="kos-standin-cred-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def _context(ca_pem, cert_pem, key_pem, insecure):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if insecure or not ca_pem:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx.load_verify_locations(cadata=ca_pem.decode() if isinstance(ca_pem, bytes) else ca_pem)
    if cert_pem and key_pem:
        cpath, kpath = _tmpfile(cert_pem), _tmpfile(key_pem)
        try:
            ctx.load_cert_chain(cpath, kpath)
        finally:
            os.unlink(cpath)
            os.unlink(kpath)
    return ctx


def _dial_target(host, port):
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        raise ClientError("dial tcp: lookup %s: no such host" % host, "dns")
    fam, _, _, _, addr = infos[0]
    ip = addr[0]
    shown = "[%s]:%d" % (ip, port) if fam == socket.AF_INET6 else "%s:%d" % (ip, port)
    return fam, addr, shown


def _san_mismatch(host, port, ca_pem, timeout):
    """Go's x509 hostname error text, built from the certificate the server presents."""
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            der = s.getpeercert(binary_form=True)
        pem = ssl.DER_cert_to_PEM_cert(der).encode()
        dns, ips = pki.cert_sans(pem)
    except (OSError, pki.PKIError):
        return "x509: certificate is not valid for %s" % host
    if pki.is_ip(host):
        if not ips:
            return ("x509: cannot validate certificate for %s because it doesn't contain any "
                    "IP SANs" % host)
        return "x509: certificate is valid for %s, not %s" % (", ".join(ips), host)
    return "x509: certificate is valid for %s, not %s" % (", ".join(dns), host)


def request(hostport, method, path, body=None, ca_pem=None, cert_pem=None, key_pem=None,
            bearer=None, insecure=False, timeout=10.0, query_timeout=True):
    """One HTTPS request; returns the decoded JSON body.  Raises ClientError / HTTPError."""
    host, port = split_host_port(hostport)
    shown_url = "https://%s%s" % (hostport, path)
    if query_timeout:
        # client-go appends the client timeout; callers may poll with a shorter socket timeout
        shown = timeout if query_timeout is True else query_timeout
        shown_url += ("&" if "?" in path else "?") + "timeout=%ds" % int(shown)
    prefix = '%s "%s": ' % (_go_verb(method), shown_url)
    try:
        fam, addr, shown_addr = _dial_target(host, port)
    except ClientError as e:
        raise ClientError(prefix + e.text, e.kind)
    ctx = _context(ca_pem, cert_pem, key_pem, insecure)
    sock = socket.socket(fam, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(addr)
    except socket.timeout:
        sock.close()
        raise ClientError(prefix + "context deadline exceeded", "timeout")
    except OSError as e:
        sock.close()
        reason = {
            errno.ECONNREFUSED: "connect: connection refused",
            errno.EHOSTUNREACH: "connect: no route to host",
            errno.ENETUNREACH: "connect: network is unreachable",
        }.get(e.errno, "connect: " + (e.strerror or str(e)).lower())
        raise ClientError(prefix + "dial tcp %s: %s" % (shown_addr, reason), "refused")
    try:
        tls = ctx.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as e:
        sock.close()
        if "hostname" in (e.verify_message or "") or "IP address mismatch" in str(e):
            msg = _san_mismatch(host, port, ca_pem, timeout)
        else:
            msg = "x509: certificate signed by unknown authority"
        raise ClientError(prefix + "tls: failed to verify certificate: " + msg, "tls")
    except (ssl.SSLError, OSError) as e:
        sock.close()
        if isinstance(e, socket.timeout):
            raise ClientError(prefix + "net/http: TLS handshake timeout", "timeout")
        raise ClientError(prefix + "remote error: tls: %s" % (getattr(e, "reason", None) or e),
                          "tls")
    conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ctx)
    conn.sock = tls
    headers = {"Accept": "application/json", "User-Agent": "kos-standin"}
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if bearer:
        headers["Authorization"] = "Bearer " + bearer
    try:
        conn.request(method, path, body=payload, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
    except socket.timeout:
        raise ClientError(prefix + "context deadline exceeded (Client.Timeout exceeded while "
                          "awaiting headers)", "timeout")
    except (OSError, http.client.HTTPException) as e:
        raise ClientError(prefix + "EOF" if not str(e) else prefix + str(e), "other")
    finally:
        conn.close()
    try:
        decoded = json.loads(data.decode() or "null")
    except ValueError:
        decoded = {"message": data.decode(errors="replace")}
    if resp.status >= 400:
        if resp.status == 401 and not (isinstance(decoded, dict) and decoded.get("reason")):
            decoded = {"reason": "Unauthorized", "message": "Unauthorized"}
        raise HTTPError(resp.status, decoded)
    return decoded


def q(value):
    return urllib.parse.quote(value, safe="")


class Api:
    """Requests against one endpoint with one set of credentials."""

    def __init__(self, hostport, ca_pem=None, cert_pem=None, key_pem=None, bearer=None,
                 insecure=False, timeout=10.0):
        self.hostport = hostport
        self.kw = dict(ca_pem=ca_pem, cert_pem=cert_pem, key_pem=key_pem, bearer=bearer,
                       insecure=insecure, timeout=timeout)

    @classmethod
    def from_kubeconfig(cls, kc, timeout=10.0):
        return cls(kc.host_port, ca_pem=kc.ca_pem, cert_pem=kc.cert_pem, key_pem=kc.key_pem,
                   bearer=kc.token, insecure=kc.insecure, timeout=timeout)

    def get(self, path):
        return request(self.hostport, "GET", path, **self.kw)

    def post(self, path, body):
        return request(self.hostport, "POST", path, body=body, **self.kw)

    def put(self, path, body):
        return request(self.hostport, "PUT", path, body=body, **self.kw)

    def patch(self, path, body):
        return request(self.hostport, "PATCH", path, body=body, **self.kw)

    def delete(self, path):
        return request(self.hostport, "DELETE", path, **self.kw)
