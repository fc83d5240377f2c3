"""Contents of the files kubeadm writes: static Pod manifests and kubelet configuration.

They are shaped like kubeadm's (same flags, paths and volumes) so that tests and states
reading them find what they would find on a real node; nothing runs them.
"""

import ipaddress

from . import env, yamlish

PAUSE_IMAGE_TAG = "3.10"

# constants.SupportedEtcdVersion of each kubeadm minor: Kubernetes minor -> etcd image tag.
# From real runs: kubeadm 1.31 deploys 3.5.15-0, 1.32.1/1.32.9 plan 3.5.16-0 for 1.31 and
# 1.32 targets, 1.33 3.5.21-0, 1.34.3 3.5.24-0 for 1.33 and 3.6.5-0 for 1.34 (the etcd row of
# `kubeadm upgrade plan`).
# Later patch releases of a minor sometimes bump these; the stand-in keeps one set per minor.
ETCD_VERSIONS = {
    31: {29: "3.5.15-0", 30: "3.5.15-0", 31: "3.5.15-0"},
    32: {30: "3.5.16-0", 31: "3.5.16-0", 32: "3.5.16-0"},
    33: {31: "3.5.21-0", 32: "3.5.21-0", 33: "3.5.21-0"},
    34: {32: "3.5.24-0", 33: "3.5.24-0", 34: "3.6.5-0"},
}
# constants.CoreDNSVersion of each kubeadm minor (real plan outputs: 1.32 v1.11.3, 1.34 v1.12.1).
COREDNS_VERSIONS = {31: "v1.11.3", 32: "v1.11.3", 33: "v1.12.0", 34: "v1.12.1"}
CONTROL_PLANE_COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


def _nearest(table, key):
    return table[min(table, key=lambda k: (abs(k - key), -k))]


def etcd_image_tag(kube_version, kubeadm_version=None):
    """The etcd tag this kubeadm deploys for `kube_version` (the nearest minor it knows)."""
    kubeadm_minor = env.version_tuple(kubeadm_version or env.version())[1]
    table = _nearest(ETCD_VERSIONS, kubeadm_minor)
    return _nearest(table, env.version_tuple(kube_version)[1])


def coredns_version(kubeadm_version=None):
    return _nearest(COREDNS_VERSIONS, env.version_tuple(kubeadm_version or env.version())[1])


def static_pod_images(cc):
    """The images of the control-plane static Pods kubeadm writes for `cc` (mirror Pods)."""
    images = {c: "%s/%s:%s" % (cc["imageRepository"], c, cc["kubernetesVersion"])
              for c in CONTROL_PLANE_COMPONENTS}
    if "external" not in cc["etcd"]:
        images["etcd"] = "%s/etcd:%s" % (cc["imageRepository"],
                                         etcd_image_tag(cc["kubernetesVersion"]))
    return images


def service_ip(subnet, index):
    net = ipaddress.ip_network(subnet.split(",")[0].strip(), strict=False)
    return str(net.network_address + index)


def _args(defaults, extra):
    merged = dict(defaults)
    for item in extra or []:
        merged[item["name"]] = item["value"]
    return ["--%s=%s" % (k, merged[k]) for k in sorted(merged)]


def _pod(name, image, command, volumes, port, probe_host, probe_path, scheme, annotations=None):
    mounts = []
    vols = []
    for vname, vpath, vtype, read_only in volumes:
        mount = {"mountPath": vpath, "name": vname}
        if read_only:
            mount["readOnly"] = True
        mounts.append(mount)
        vols.append({"hostPath": {"path": vpath, "type": vtype}, "name": vname})
    probe = {"failureThreshold": 8, "httpGet": {"host": probe_host, "path": probe_path,
                                                "port": port, "scheme": scheme},
             "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 15}
    meta = {"creationTimestamp": None, "labels": {"component": name, "tier": "control-plane"},
            "name": name, "namespace": "kube-system"}
    if annotations:
        meta["annotations"] = annotations
    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "containers": [{
                "command": command,
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "livenessProbe": probe,
                "name": name,
                "resources": {"requests": {"cpu": "250m" if name == "kube-apiserver"
                                           else "100m"}},
                "startupProbe": dict(probe, failureThreshold=24),
                "volumeMounts": mounts,
            }],
            "hostNetwork": True,
            "priority": 2000001000,
            "priorityClassName": "system-node-critical",
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": vols,
        },
        "status": {},
    }
    return yamlish.dump(doc)


def _cert_volumes(cc):
    pki = cc["certificatesDir"]
    return [("ca-certs", "/etc/ssl/certs", "DirectoryOrCreate", True),
            ("etc-ca-certificates", "/etc/ca-certificates", "DirectoryOrCreate", True),
            ("k8s-certs", pki, "DirectoryOrCreate", True),
            ("usr-local-share-ca-certificates", "/usr/local/share/ca-certificates",
             "DirectoryOrCreate", True),
            ("usr-share-ca-certificates", "/usr/share/ca-certificates", "DirectoryOrCreate",
             True)]


def apiserver_manifest(cc, node):
    pki = cc["certificatesDir"]
    if "external" in cc["etcd"]:
        ext = cc["etcd"]["external"]
        etcd = {"etcd-cafile": ext.get("caFile", ""), "etcd-certfile": ext.get("certFile", ""),
                "etcd-keyfile": ext.get("keyFile", ""),
                "etcd-servers": ",".join(ext.get("endpoints") or [])}
    else:
        etcd = {"etcd-cafile": pki + "/etcd/ca.crt",
                "etcd-certfile": pki + "/apiserver-etcd-client.crt",
                "etcd-keyfile": pki + "/apiserver-etcd-client.key",
                "etcd-servers": "https://127.0.0.1:2379"}
    defaults = {
        "advertise-address": node["advertiseAddress"],
        "allow-privileged": "true",
        "authorization-mode": "Node,RBAC",
        "client-ca-file": pki + "/ca.crt",
        "enable-admission-plugins": "NodeRestriction",
        "enable-bootstrap-token-auth": "true",
        "kubelet-client-certificate": pki + "/apiserver-kubelet-client.crt",
        "kubelet-client-key": pki + "/apiserver-kubelet-client.key",
        "kubelet-preferred-address-types": "InternalIP,ExternalIP,Hostname",
        "proxy-client-cert-file": pki + "/front-proxy-client.crt",
        "proxy-client-key-file": pki + "/front-proxy-client.key",
        "requestheader-allowed-names": "front-proxy-client",
        "requestheader-client-ca-file": pki + "/front-proxy-ca.crt",
        "requestheader-extra-headers-prefix": "X-Remote-Extra-",
        "requestheader-group-headers": "X-Remote-Group",
        "requestheader-username-headers": "X-Remote-User",
        "secure-port": str(node["bindPort"]),
        "service-account-issuer": "https://kubernetes.default.svc." + cc["networking"]["dnsDomain"],
        "service-account-key-file": pki + "/sa.pub",
        "service-account-signing-key-file": pki + "/sa.key",
        "service-cluster-ip-range": cc["networking"]["serviceSubnet"],
        "tls-cert-file": pki + "/apiserver.crt",
        "tls-private-key-file": pki + "/apiserver.key",
    }
    defaults.update(etcd)
    command = ["kube-apiserver"] + _args(defaults, cc["apiServer"].get("extraArgs"))
    image = "%s/kube-apiserver:%s" % (cc["imageRepository"], cc["kubernetesVersion"])
    return _pod("kube-apiserver", image, command, _cert_volumes(cc), node["bindPort"],
                node["advertiseAddress"], "/livez", "HTTPS",
                {"kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint":
                 "%s:%d" % (node["advertiseAddress"], node["bindPort"])})


def controller_manager_manifest(cc):
    pki = cc["certificatesDir"]
    defaults = {
        "authentication-kubeconfig": "/etc/kubernetes/controller-manager.conf",
        "authorization-kubeconfig": "/etc/kubernetes/controller-manager.conf",
        "bind-address": "127.0.0.1",
        "client-ca-file": pki + "/ca.crt",
        "cluster-name": cc["clusterName"],
        "cluster-signing-cert-file": pki + "/ca.crt",
        "cluster-signing-key-file": pki + "/ca.key",
        "controllers": "*,bootstrapsigner,tokencleaner",
        "kubeconfig": "/etc/kubernetes/controller-manager.conf",
        "leader-elect": "true",
        "requestheader-client-ca-file": pki + "/front-proxy-ca.crt",
        "root-ca-file": pki + "/ca.crt",
        "service-account-private-key-file": pki + "/sa.key",
        "use-service-account-credentials": "true",
    }
    if cc["networking"].get("podSubnet"):
        defaults["allocate-node-cidrs"] = "true"
        defaults["cluster-cidr"] = cc["networking"]["podSubnet"]
        defaults["service-cluster-ip-range"] = cc["networking"]["serviceSubnet"]
    command = ["kube-controller-manager"] + _args(defaults,
                                                  cc["controllerManager"].get("extraArgs"))
    image = "%s/kube-controller-manager:%s" % (cc["imageRepository"], cc["kubernetesVersion"])
    vols = _cert_volumes(cc) + [
        ("flexvolume-dir", "/usr/libexec/kubernetes/kubelet-plugins/volume/exec",
         "DirectoryOrCreate", False),
        ("kubeconfig", "/etc/kubernetes/controller-manager.conf", "FileOrCreate", True)]
    return _pod("kube-controller-manager", image, command, vols, 10257, "127.0.0.1",
                "/healthz", "HTTPS")


def scheduler_manifest(cc):
    defaults = {
        "authentication-kubeconfig": "/etc/kubernetes/scheduler.conf",
        "authorization-kubeconfig": "/etc/kubernetes/scheduler.conf",
        "bind-address": "127.0.0.1",
        "kubeconfig": "/etc/kubernetes/scheduler.conf",
        "leader-elect": "true",
    }
    command = ["kube-scheduler"] + _args(defaults, cc["scheduler"].get("extraArgs"))
    image = "%s/kube-scheduler:%s" % (cc["imageRepository"], cc["kubernetesVersion"])
    vols = [("kubeconfig", "/etc/kubernetes/scheduler.conf", "FileOrCreate", True)]
    return _pod("kube-scheduler", image, command, vols, 10259, "127.0.0.1", "/healthz",
                "HTTPS")


def etcd_manifest(cc, node, initial_cluster, cluster_state="new", image_tag=None):
    pki = cc["certificatesDir"]
    local = cc["etcd"]["local"]
    ip = node["advertiseAddress"]
    defaults = {
        "advertise-client-urls": "https://%s:2379" % ip,
        "cert-file": pki + "/etcd/server.crt",
        "client-cert-auth": "true",
        "data-dir": local["dataDir"],
        "experimental-initial-corrupt-check": "true",
        "experimental-watch-progress-notify-interval": "5s",
        "initial-advertise-peer-urls": "https://%s:2380" % ip,
        "initial-cluster": initial_cluster,
        "key-file": pki + "/etcd/server.key",
        "listen-client-urls": "https://127.0.0.1:2379,https://%s:2379" % ip,
        "listen-metrics-urls": "http://127.0.0.1:2381",
        "listen-peer-urls": "https://%s:2380" % ip,
        "name": node["name"],
        "peer-cert-file": pki + "/etcd/peer.crt",
        "peer-client-cert-auth": "true",
        "peer-key-file": pki + "/etcd/peer.key",
        "peer-trusted-ca-file": pki + "/etcd/ca.crt",
        "snapshot-count": "10000",
        "trusted-ca-file": pki + "/etcd/ca.crt",
    }
    if cluster_state != "new":
        defaults["initial-cluster-state"] = cluster_state
    command = ["etcd"] + _args(defaults, local.get("extraArgs"))
    image = "%s/etcd:%s" % (cc["imageRepository"],
                            image_tag or etcd_image_tag(cc["kubernetesVersion"]))
    vols = [("etcd-certs", pki + "/etcd", "DirectoryOrCreate", False),
            ("etcd-data", local["dataDir"], "DirectoryOrCreate", False)]
    return _pod("etcd", image, command, vols, 2381, "127.0.0.1", "/livez", "HTTP",
                {"kubeadm.kubernetes.io/etcd.advertise-client-urls": "https://%s:2379" % ip})


def kubelet_config(cc, extra=None):
    doc = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "authentication": {"anonymous": {"enabled": False},
                           "webhook": {"cacheTTL": "0s", "enabled": True},
                           "x509": {"clientCAFile": cc["certificatesDir"] + "/ca.crt"}},
        "authorization": {"mode": "Webhook",
                          "webhook": {"cacheAuthorizedTTL": "0s",
                                      "cacheUnauthorizedTTL": "0s"}},
        "cgroupDriver": "systemd",
        "clusterDNS": [service_ip(cc["networking"]["serviceSubnet"], 10)],
        "clusterDomain": cc["networking"]["dnsDomain"],
        "containerRuntimeEndpoint": "",
        "cpuManagerReconcilePeriod": "0s",
        "evictionPressureTransitionPeriod": "0s",
        "fileCheckFrequency": "0s",
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "httpCheckFrequency": "0s",
        "imageMaximumGCAge": "0s",
        "imageMinimumGCAge": "0s",
        "kind": "KubeletConfiguration",
        "logging": {"flushFrequency": 0, "options": {"json": {"infoBufferSize": "0"},
                                                     "text": {"infoBufferSize": "0"}},
                    "verbosity": 0},
        "memorySwap": {},
        "nodeStatusReportFrequency": "0s",
        "nodeStatusUpdateFrequency": "0s",
        "rotateCertificates": True,
        "runtimeRequestTimeout": "0s",
        "shutdownGracePeriod": "0s",
        "shutdownGracePeriodCriticalPods": "0s",
        "staticPodPath": "/etc/kubernetes/manifests",
        "streamingConnectionIdleTimeout": "0s",
        "syncFrequency": "0s",
        "volumeStatsAggPeriod": "0s",
    }
    for k, v in (extra or {}).items():
        if k not in ("apiVersion", "kind"):
            doc[k] = v
    return yamlish.dump(doc)


def kubeadm_flags_env(node, cc, hostname):
    args = {"container-runtime-endpoint": node["criSocket"],
            "pod-infra-container-image": "%s/pause:%s" % (cc["imageRepository"],
                                                          PAUSE_IMAGE_TAG)}
    if node["name"] != hostname.lower():
        args["hostname-override"] = node["name"]
    for item in node.get("kubeletExtraArgs") or []:
        args[item["name"]] = item["value"]
    flags = " ".join("--%s=%s" % (k, args[k]) for k in sorted(args))
    return 'KUBELET_KUBEADM_ARGS="%s"\n' % flags
