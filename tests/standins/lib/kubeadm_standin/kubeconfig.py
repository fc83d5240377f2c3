"""Reading and writing kubeconfig files the way kubeadm lays them out."""

import base64
import os

from . import env, yamlish


class KubeconfigError(RuntimeError):
    pass


def render(server, ca_pem, user, cluster_name="kubernetes", cert_pem=None, key_pem=None,
           cert_file=None, key_file=None, token=None):
    """Text of a kubeconfig with one cluster, one user and one context (kubeadm's shape)."""
    if isinstance(ca_pem, bytes):
        ca_pem = ca_pem.decode()
    user_entry = {}
    if cert_pem is not None:
        user_entry["client-certificate-data"] = _b64(cert_pem)
        user_entry["client-key-data"] = _b64(key_pem)
    if cert_file:
        user_entry["client-certificate"] = cert_file
        user_entry["client-key"] = key_file
    if token:
        user_entry["token"] = token
    context = "%s@%s" % (user, cluster_name)
    doc = {
        "apiVersion": "v1",
        "clusters": [{"cluster": {"certificate-authority-data": _b64(ca_pem), "server": server},
                      "name": cluster_name}],
        "contexts": [{"context": {"cluster": cluster_name, "user": user}, "name": context}],
        "current-context": context,
        "kind": "Config",
        "preferences": {},
        "users": [{"name": user, "user": user_entry}],
    }
    return yamlish.dump(doc)


def _b64(data):
    if isinstance(data, str):
        data = data.encode()
    return base64.b64encode(data).decode()


class Kubeconfig:
    """The current context of a kubeconfig, with credentials resolved to PEM bytes."""

    def __init__(self, server, ca_pem=None, cert_pem=None, key_pem=None, token=None,
                 insecure=False, cluster_name="kubernetes", path=None):
        self.server = server
        self.ca_pem = ca_pem
        self.cert_pem = cert_pem
        self.key_pem = key_pem
        self.token = token
        self.insecure = insecure
        self.cluster_name = cluster_name
        self.path = path

    @property
    def host_port(self):
        s = self.server
        for prefix in ("https://", "http://"):
            if s.startswith(prefix):
                s = s[len(prefix):]
        return s.rstrip("/")


def _read_ref(data_value, file_value, base_dir):
    if data_value:
        return base64.b64decode(data_value)
    if file_value:
        path = file_value if os.path.isabs(file_value) else os.path.join(base_dir, file_value)
        with open(env.input_file(path), "rb") as f:
            return f.read()
    return None


def parse(text, path=None, context=None):
    docs = yamlish.load_all(text)
    doc = docs[0] if docs else None
    if not isinstance(doc, dict):
        raise KubeconfigError("invalid configuration: no configuration has been provided")
    ctx_name = context or doc.get("current-context")
    contexts = {c.get("name"): c.get("context") or {} for c in doc.get("contexts") or []}
    clusters = {c.get("name"): c.get("cluster") or {} for c in doc.get("clusters") or []}
    users = {u.get("name"): u.get("user") or {} for u in doc.get("users") or []}
    if not ctx_name or ctx_name not in contexts:
        if len(clusters) == 1 and not ctx_name:
            ctx = {"cluster": next(iter(clusters)), "user": next(iter(users), None)}
        else:
            raise KubeconfigError('context "%s" does not exist' % (ctx_name or ""))
    else:
        ctx = contexts[ctx_name]
    cluster = clusters.get(ctx.get("cluster"))
    if cluster is None:
        raise KubeconfigError('cluster "%s" does not exist' % ctx.get("cluster"))
    user = users.get(ctx.get("user")) or {}
    base_dir = os.path.dirname(path) if path else os.getcwd()
    return Kubeconfig(
        server=cluster.get("server", ""),
        ca_pem=_read_ref(cluster.get("certificate-authority-data"),
                         cluster.get("certificate-authority"), base_dir),
        cert_pem=_read_ref(user.get("client-certificate-data"),
                           user.get("client-certificate"), base_dir),
        key_pem=_read_ref(user.get("client-key-data"), user.get("client-key"), base_dir),
        token=user.get("token"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        cluster_name=ctx.get("cluster") or "kubernetes",
        path=path,
    )


def load(path, context=None):
    """Load a kubeconfig given by its simulated absolute path (or a literal path)."""
    real = env.input_file(path)
    with open(real) as f:
        return parse(f.read(), path=path, context=context)
