"""Install-time layout of the microk8s snap (what its install and configure hooks leave)."""

import os
import shutil

from . import catalog, common, datastore, netinfo, pki

# Default service arguments.  Subsets of MK microk8s-resources/default-args/* (constructed);
# the lines other code reads (--bind, --secure-port, --authorization-mode, --cluster-cidr,
# --node-labels, --cluster-dns/--cluster-domain) carry the real default values.
DEFAULT_ARGS = {
    "cluster-agent": (
        "--bind 0.0.0.0:25000\n"
        '--keyfile "${SNAP_DATA}/certs/server.key"\n'
        '--certfile "${SNAP_DATA}/certs/server.crt"\n'
        "--timeout 240\n"
    ),
    "kube-apiserver": (
        "--cert-dir=${SNAP_DATA}/certs\n"
        "--service-cluster-ip-range=10.152.183.0/24\n"
        "--authorization-mode=AlwaysAllow\n"
        "--service-account-key-file=${SNAP_DATA}/certs/serviceaccount.key\n"
        "--client-ca-file=${SNAP_DATA}/certs/ca.crt\n"
        "--tls-cert-file=${SNAP_DATA}/certs/server.crt\n"
        "--tls-private-key-file=${SNAP_DATA}/certs/server.key\n"
        "--kubelet-client-certificate=${SNAP_DATA}/certs/server.crt\n"
        "--kubelet-client-key=${SNAP_DATA}/certs/server.key\n"
        "--secure-port=16443\n"
        '--etcd-servers="unix://${SNAP_DATA}/var/kubernetes/backend/kine.sock:12379"\n'
        "--allow-privileged=true\n"
        "--service-account-issuer='https://kubernetes.default.svc'\n"
        "--service-account-signing-key-file=${SNAP_DATA}/certs/serviceaccount.key\n"
        "--requestheader-client-ca-file=${SNAP_DATA}/certs/front-proxy-ca.crt\n"
        "--requestheader-allowed-names=front-proxy-client\n"
        "--proxy-client-cert-file=${SNAP_DATA}/certs/front-proxy-client.crt\n"
        "--proxy-client-key-file=${SNAP_DATA}/certs/front-proxy-client.key\n"
    ),
    "kubelet": (
        "--kubeconfig=${SNAP_DATA}/credentials/kubelet.config\n"
        "--cert-dir=${SNAP_DATA}/certs\n"
        "--client-ca-file=${SNAP_DATA}/certs/ca.crt\n"
        "--anonymous-auth=false\n"
        "--root-dir=${SNAP_COMMON}/var/lib/kubelet\n"
        "--fail-swap-on=false\n"
        "--container-runtime-endpoint=${SNAP_COMMON}/run/containerd.sock\n"
        '--node-labels="microk8s.io/cluster=true,node.kubernetes.io/microk8s-controlplane=microk8s-controlplane"\n'
        "--authentication-token-webhook=true\n"
        "--read-only-port=0\n"
    ),
    "kube-proxy": (
        "--kubeconfig=${SNAP_DATA}/credentials/proxy.config\n"
        "--cluster-cidr=10.1.0.0/16\n"
        "--healthz-bind-address=127.0.0.1\n"
        "--profiling=false\n"
    ),
    "kube-scheduler": "--kubeconfig=${SNAP_DATA}/credentials/scheduler.config\n--leader-elect-lease-duration=60s\n",
    "kube-controller-manager": (
        "--kubeconfig=${SNAP_DATA}/credentials/controller.config\n"
        "--service-account-private-key-file=${SNAP_DATA}/certs/serviceaccount.key\n"
        "--root-ca-file=${SNAP_DATA}/certs/ca.crt\n"
        "--cluster-signing-cert-file=${SNAP_DATA}/certs/ca.crt\n"
        "--cluster-signing-key-file=${SNAP_DATA}/certs/ca.key\n"
    ),
    "kubelite": (
        "--scheduler-args-file=$SNAP_DATA/args/kube-scheduler\n"
        "--controller-manager-args-file=$SNAP_DATA/args/kube-controller-manager\n"
        "--proxy-args-file=$SNAP_DATA/args/kube-proxy\n"
        "--kubelet-args-file=$SNAP_DATA/args/kubelet\n"
        "--apiserver-args-file=$SNAP_DATA/args/kube-apiserver\n"
        "--kubeconfig-file=$SNAP_DATA/credentials/client.config\n"
        "--start-control-plane=true\n"
    ),
    "k8s-dqlite": (
        "--storage-dir=${SNAP_DATA}/var/kubernetes/backend/\n"
        "--listen=unix://${SNAP_DATA}/var/kubernetes/backend/kine.sock:12379\n"
    ),
    "containerd": "--config ${SNAP_DATA}/args/containerd.toml\n--root ${SNAP_COMMON}/var/lib/containerd\n",
    "apiserver-proxy": (
        "--traefik-config ${SNAP_DATA}/args/traefik/traefik.yaml\n"
        "--kubeconfig ${SNAP_DATA}/credentials/kubelet.config\n"
        "--refresh-interval 30s\n"
    ),
    "kubectl": "",
}

INSTALL_LOCKS = ("ha-cluster", "lite.lock", "no-apiserver-proxy", "no-etcd", "no-flanneld")

DNS_RESOURCES = [
    "pod/coredns-864597b5fd-7hpqx",
    "deployment.apps/coredns",
    "service/kube-dns",
    "replicaset.apps/coredns-864597b5fd",
]


def client_config(server="https://127.0.0.1:16443"):
    return (
        "apiVersion: v1\n"
        "clusters:\n"
        "- cluster:\n"
        "    certificate-authority-data: {ca}\n"
        "    server: {server}\n"
        "  name: microk8s-cluster\n"
        "contexts:\n"
        "- context:\n"
        "    cluster: microk8s-cluster\n"
        "    user: admin\n"
        "  name: microk8s\n"
        "current-context: microk8s\n"
        "kind: Config\n"
        "preferences: {{}}\n"
        "users:\n"
        "- name: admin\n"
        "  user:\n"
        "    client-certificate-data: {cert}\n"
        "    client-key-data: {key}\n"
    ).format(
        ca=pki.b64_file(pki.certs("ca.crt")),
        server=server,
        cert=pki.b64_file(pki.certs("admin.crt")),
        key=pki.b64_file(pki.certs("admin.key")),
    )


def write_client_config():
    common.write_file(common.data("credentials", "client.config"), client_config(), mode=0o600)


def find_resolv_conf():
    """find-resolv-conf.py: first host resolv.conf with a non-loopback nameserver."""
    for candidate in ("/etc/resolv.conf", "/run/systemd/resolve/resolv.conf"):
        path = common.rpath(candidate)
        for line in common.read_file(path, "").splitlines():
            fields = line.split()
            if len(fields) >= 2 and fields[0] == "nameserver":
                if not (fields[1].startswith("127.") or fields[1] == "::1"):
                    return path
    return None


def write_addon_repo(repo, track):
    d = os.path.join(common.snap_common(), "addons", repo)
    os.makedirs(d, exist_ok=True)
    common.write_file(os.path.join(d, ".kos-standin-track"), track + "\n")
    common.write_file(os.path.join(d, "addons.yaml"), catalog.addons_yaml(repo, track))


def create_snap_dir(rev, track):
    snap_dir = common.rpath("/snap/microk8s/{}".format(rev))
    os.makedirs(os.path.join(snap_dir, "bin"), exist_ok=True)
    common.touch(os.path.join(snap_dir, "bin", "helm"), 0o755)
    os.makedirs(os.path.join(snap_dir, "addons", "community"), exist_ok=True)
    common.write_file(
        os.path.join(snap_dir, "addons", "community", "addons.yaml"), catalog.addons_yaml("community", track)
    )
    for name, content in DEFAULT_ARGS.items():
        common.write_file(os.path.join(snap_dir, "default-args", name), content)
    common.write_file(os.path.join(snap_dir, "certs", "csr.conf.template"), pki.CSR_CONF_TEMPLATE)
    common.write_file(
        os.path.join(snap_dir, "meta", "snap.yaml"),
        "name: microk8s\nversion: {}\nconfinement: classic\n".format(catalog.TRACKS[catalog.track_minor(track)][0]),
    )
    _point_current(common.rpath("/snap/microk8s"), rev)


def _point_current(parent, rev):
    link = os.path.join(parent, "current")
    tmp = link + ".tmp"
    common.remove(tmp)
    os.symlink(str(rev), tmp)
    os.replace(tmp, link)


def point_data_current(rev):
    _point_current(common.rpath("/var/snap/microk8s"), rev)


def create_data_dir(rev, track, version):
    """install hook: locks, args, certs, kubeconfig, dqlite and the default-enabled dns."""
    base = common.rpath("/var/snap/microk8s/{}".format(rev))
    os.makedirs(base, exist_ok=True)
    point_data_current(rev)
    for sub in ("var/lock", "var/run", "var/tmp", "credentials", "certs", "args", "var/kubernetes/backend"):
        os.makedirs(common.data(sub), exist_ok=True)
    for name in INSTALL_LOCKS:
        common.touch(common.lock(name), 0o700)
    for name, content in DEFAULT_ARGS.items():
        common.write_file(common.data("args", name), content)
    # The launch configuration enables dns; its enable script pins kubelet's DNS settings.
    resolv = find_resolv_conf()
    if resolv:
        common.set_arg("kubelet", "--resolv-conf", resolv)
    common.set_arg("kubelet", "--cluster-domain", "cluster.local")
    common.set_arg("kubelet", "--cluster-dns", "10.152.183.10")
    pki.produce_certs()
    write_client_config()
    pki.gen_dqlite_cert(datastore.backend(), netinfo.hostname())
    ds = datastore.fresh(version, datastore.BASE_RESOURCES + DNS_RESOURCES)
    datastore.save(ds, my_addr=ds["members"][0]["address"])
    os.makedirs(common.snap_common(), exist_ok=True)
    write_addon_repo("core", track)


def remove_all():
    shutil.rmtree(common.rpath("/var/snap/microk8s"), ignore_errors=True)
    shutil.rmtree(common.rpath("/snap/microk8s"), ignore_errors=True)
    bindir = common.rpath("/snap/bin")
    if os.path.isdir(bindir):
        for name in os.listdir(bindir):
            if name == "microk8s" or name.startswith("microk8s."):
                common.remove(os.path.join(bindir, name))
    common.remove(common.install_record_path())
