"""
Manage a kubeadm node's membership through the ``kubeadm`` command: its status, ``init``,
``join`` and ``reset``. The other kubeadm concerns have modules of their own: ``kos_join``
(the join credentials: bootstrap tokens, the certificate key, the CA hash),
``kos_kubectl`` (nodes, drain, manifests), ``kos_certs``, ``kos_upgrade``, ``kos_podnet``,
``kos_images`` and ``kos_etcd``.

Behaviour follows what kubeadm prints and returns: messages on stderr, exit code 1 on
every failure (https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/util/errors/handler.go).

Join tokens and certificate keys never reach the minion log: every command whose
output carries one runs with ``output_loglevel="quiet"``, secrets are never passed
on a command line (``ps`` shows it to every local user), and texts returned or
raised are redacted.

:depends: ``kubeadm`` and ``kubectl`` on PATH
"""

import os
import re
import shutil
import tempfile

import salt.utils.yaml
from salt.exceptions import CommandExecutionError

from saltext.kos.utils import kos_cli, kos_kubeadm

__virtualname__ = "kubeadm"

CONFIG_API = "kubeadm.k8s.io/v1beta4"
DRY_RUN_DIR_RE = re.compile(r'"(/etc/kubernetes/tmp/kubeadm-init-dryrun\d+)"')


def __virtual__():
    return kos_cli.virtual(
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
    return kos_kubeadm.kube_dir(__salt__, kube_dir)


_kube_dir = get_kube_dir


def _run(args, secret=False, ok_retcodes=(0,), stdin=None):
    """Run ``kubeadm <args>``; ``secret`` keeps tokens and certificate keys out of the log."""
    return kos_cli.run(
        __salt__, ["kubeadm", *args], secret=secret, ok_retcodes=ok_retcodes, stdin=stdin,
        describe=kos_kubeadm.message,
    )


def _forget():
    # init, join and reset change the cluster's nodes and its tokens (init makes one)
    for prefix in ("kos_join", "kos_kubectl"):
        kos_cli.forget(__context__, prefix)


def version():
    """
    Return the kubeadm version (``kubeadm version -o short``), e.g. ``v1.31.4``.

    CLI Example:

    .. code-block:: bash

        salt '*' kubeadm.version
    """
    return _run(["version", "-o", "short"])["stdout"].strip()


def _object_exists(kind, name, namespace, kubeconfig):
    return __salt__["kos_kubectl.object_exists"](kind, name, namespace, kubeconfig)


def init_status(kube_dir=None):
    """
    Whether this node is an initialized first control plane, judged by the outcome:
    the API answers through the control-plane endpoint (the admin kubeconfig's server)
    and the cluster holds what ``kubeadm init`` uploads last, the ``kubeadm-config``
    ConfigMap (phase upload-config) and the ``cluster-info`` ConfigMap joins read
    (phase bootstrap-token). The static Pod manifests alone prove nothing: kubeadm
    writes them in its control-plane phase, before it waits for the API (the phase order of
    https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-init/#init-workflow),
    so an init that timed out leaves them behind.

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
    admin = os.path.join(_kube_dir(kube_dir), "admin.conf")
    try:
        config = _object_exists("configmap", "kubeadm-config", "kube-system", admin)
        info = _object_exists("configmap", "cluster-info", "kube-public", admin)
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
    etcd member is added (the phases of ``kubeadm join``, in the order
    https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/cmd/join.go
    appends them).

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
        registered = _object_exists("node", node_name, None, kubeconfig)
        member = registered and (not (control_plane and stacked_etcd) or _object_exists(
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
    args += kos_cli.flags(
        [
            ("--upload-certs", upload_certs),
            ("--dry-run", dry_run),
            ("--ignore-preflight-errors", ignore_preflight_errors),
            ("--skip-phases", skip_phases),
        ],
        joined=True,
    )
    try:
        out = _run(args, secret=True)["stdout"]
    finally:
        _forget()
    if dry_run:
        match = DRY_RUN_DIR_RE.search(out)
        if match:
            # kubeadm leaves its dry-run directory behind; a test run should not.
            rel = os.path.relpath(match.group(1), kos_kubeadm.default_kube_dir())
            shutil.rmtree(os.path.join(_kube_dir(kube_dir), rel), ignore_errors=True)
    return kos_kubeadm.redact(out)


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
        doc["timeouts"] = {"discovery": kos_kubeadm.duration(discovery_timeout)}
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
        args += kos_cli.flags([("--ignore-preflight-errors", ignore_preflight_errors)],
                             joined=True)
        return kos_kubeadm.redact(_run(args, secret=True)["stdout"])
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
    args = ["reset"] + kos_cli.flags(
        [("--force", force), ("--dry-run", dry_run), ("--cleanup-tmp-dir", cleanup_tmp_dir)],
        joined=True,
    )
    try:
        # stdin closed: an unexpected prompt fails instead of hanging
        return kos_kubeadm.redact(_run(args, stdin="")["stdout"])
    finally:
        _forget()
