"""`kubeadm reset`: undo init/join on this node; idempotent on a clean node
(https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-reset/,
https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/cmd/reset.go)."""

import os
import shutil
import sys

from . import apiserver, client, common, config, env, gofmt, kubeconfig, pki, yamlish
from .kubeadm_join import _upload_config_hint

RESET_TAIL = """
The reset process does not clean CNI configuration. To do so, you must remove /etc/cni/net.d

The reset process does not reset or clean up iptables rules or IPVS tables.
If you wish to reset iptables, you must do so manually by using the "iptables" command.

If your cluster was setup to utilize IPVS, run ipvsadm --clear (or similar)
to reset your system's IPVS tables.

The reset process does not clean your kubeconfig files and you must remove them manually.
Please, check the contents of the $HOME/.kube/config file.
"""

DEFAULT_PKI = "/etc/kubernetes/pki"


def _clean_dir(path):
    """reset.CleanDir: remove a directory's contents, keep the directory."""
    real = env.host(path)
    if not os.path.isdir(real):
        return
    for name in os.listdir(real):
        p = os.path.join(real, name)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p, ignore_errors=True)
        else:
            try:
                os.unlink(p)
            except OSError:
                pass


def _node_name():
    """The node name kubeadm derives from kubelet.conf's client certificate."""
    try:
        kc = kubeconfig.load("/etc/kubernetes/kubelet.conf")
        cn = pki.cert_subject_cn(kc.cert_pem) if kc.cert_pem else ""
        if cn.startswith("system:node:"):
            return cn[len("system:node:"):]
    except (OSError, kubeconfig.KubeconfigError, pki.PKIError, ValueError):
        pass
    return env.hostname().lower()


def _etcd_data_dir_from_manifest():
    path = env.host("/etc/kubernetes/manifests/etcd.yaml")
    if not os.path.exists(path):
        return "/var/lib/etcd"
    try:
        with open(path) as f:
            pod = yamlish.load(f.read())
        for vol in pod["spec"]["volumes"]:
            if vol.get("name") == "etcd-data":
                return vol["hostPath"]["path"]
    except (OSError, KeyError, TypeError, yamlish.YamlError):
        pass
    return "/var/lib/etcd"


def _mark_not_ready(name):
    """The kubelet stops posting status; the node turns NotReady (best effort)."""
    try:
        kc = kubeconfig.load("/etc/kubernetes/kubelet.conf")
        client.Api.from_kubeconfig(kc, timeout=2.0).patch("/api/v1/nodes/" + name,
                                                          {"ready": False})
    except (OSError, kubeconfig.KubeconfigError, client.ClientError, client.HTTPError,
            ValueError):
        pass


def cmd_reset(args, parse_for):
    values, _, pos = parse_for(["reset"], args)
    if pos:
        raise common.Failure('unknown command "%s" for "kubeadm reset"' % pos[0])
    ignore = common.ignore_set(values["ignore-preflight-errors"])
    dry_run = values["dry-run"]
    kc_path = values["kubeconfig"] or "/etc/kubernetes/admin.conf"

    cfg, api = None, None
    if os.path.exists(env.input_file(kc_path)):
        try:
            _, api = common.admin_api(kc_path, timeout=5.0)
        except common.Failure:
            api = None
    if api is not None:
        _upload_config_hint("reset")
        try:
            cm = api.get("/api/v1/namespaces/kube-system/configmaps/kubeadm-config")
            cfg = config.normalize_cluster(yamlish.load(cm["data"]["ClusterConfiguration"]))
        except (client.ClientError, client.HTTPError) as e:
            gofmt.klog("W", "reset.go:124", "[reset] Unable to fetch the kubeadm-config ConfigMap "
                       "from cluster: failed to get config map: %s" % common.api_error_text(e))

    if not values["force"] and not dry_run:
        gofmt.klog("W", "preflight.go:56", "[reset] WARNING: Changes made to this host by "
                   "'kubeadm init' or 'kubeadm join' will be reverted.")
        common.confirm("reset")
    env.out("[preflight] Running pre-flight checks")
    common.root_check(ignore)

    # remove-etcd-member
    name = _node_name()
    if cfg is not None and not config.external_etcd(cfg):
        data_dir = cfg["etcd"]["local"]["dataDir"]
    else:
        gofmt.klog("W", "removeetcdmember.go:106", "[reset] No kubeadm config, using etcd pod "
                   "spec to get data directory")
        data_dir = _etcd_data_dir_from_manifest()
    cleaned = False
    if cfg is not None:
        if dry_run:
            env.out("[reset] Would remove the etcd member on this node from the etcd cluster")
            env.out("[reset] Would delete contents of the etcd data directory: %s" % data_dir)
        else:
            try:
                # the stand-in's replica list plays the part of the etcd member list
                api.delete("/kos/v1/members/" + name)
                _clean_dir(data_dir)
                env.out("[reset] Deleted contents of the etcd data directory: %s" % data_dir)
                cleaned = True
            except (client.ClientError, client.HTTPError) as e:
                gofmt.klog("W", "removeetcdmember.go:73", "[reset] Failed to remove etcd member: "
                           "%s, please manually remove this etcd member using etcdctl"
                           % common.api_error_text(e))
    real_data = env.host(data_dir)
    empty = os.path.isdir(real_data) and not os.listdir(real_data)
    if not cleaned and not empty and not dry_run:
        # IsDirEmpty fails on a missing directory, so kubeadm "cleans" it anyway
        _clean_dir(data_dir)
        env.out("[reset] Deleted contents of the etcd data directory: %s" % data_dir)

    # cleanup-node
    dirs = ["/etc/kubernetes/manifests"]
    if dry_run:
        env.out("[reset] Would stop the kubelet service")
        env.out('[reset] Would unmount mounted directories in "/var/lib/kubelet"')
        env.out("[reset] Would remove Kubernetes-managed containers")
    else:
        env.out("[reset] Stopping the kubelet service")
        _mark_not_ready(name)
        # static Pods die with the kubelet: so does this node's stand-in API server
        apiserver.stop()
        env.out('[reset] Unmounting mounted directories in "/var/lib/kubelet"')
        if os.path.isdir(env.host("/var/lib/kubelet")):
            dirs.append("/var/lib/kubelet")
        else:
            gofmt.klog("W", "cleanupnode.go:104", '[reset] Failed to evaluate the '
                       '"/var/lib/kubelet" directory. Skipping its unmount and cleanup: lstat '
                       '/var/lib/kubelet: no such file or directory')
    certs_dir = values["cert-dir"] or (cfg or {}).get("certificatesDir") or DEFAULT_PKI
    if certs_dir != DEFAULT_PKI:
        gofmt.klog("W", "cleanupnode.go:126", '[reset] WARNING: Cleaning a non-default '
                   'certificates directory: "%s"' % certs_dir)
    dirs.append(certs_dir)
    if values["cleanup-tmp-dir"]:
        dirs.append("/etc/kubernetes/tmp")
    files = ["/etc/kubernetes/admin.conf"]
    if env.minor() >= 29:
        files.append("/etc/kubernetes/super-admin.conf")
    files += ["/etc/kubernetes/kubelet.conf", "/etc/kubernetes/bootstrap-kubelet.conf",
              "/etc/kubernetes/controller-manager.conf", "/etc/kubernetes/scheduler.conf"]
    if dry_run:
        env.out("[reset] Would delete contents of directories: [%s]" % " ".join(dirs))
        env.out("[reset] Would delete files: [%s]" % " ".join(files))
    else:
        env.out("[reset] Deleting contents of directories: [%s]" % " ".join(dirs))
        for d in dirs:
            _clean_dir(d)
        env.out("[reset] Deleting files: [%s]" % " ".join(files))
        for f in files:
            p = env.host(f)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            elif os.path.lexists(p):
                os.unlink(p)
        # the stand-in's copy of the cluster state goes with the etcd data
        shutil.rmtree(env.host(env.STATE_DIR), ignore_errors=True)
    sys.stdout.write(RESET_TAIL)
    sys.stdout.flush()
