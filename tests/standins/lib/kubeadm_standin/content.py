"""Contents of the files kubeadm writes: static Pod manifests and kubelet configuration.

They are shaped like kubeadm's (same flags, paths and volumes) so that tests and states
reading them find what they would find on a real node; nothing runs them.
"""

import ipaddress

from . import yamlish

ETCD_IMAGE_TAG = "3.5.15-0"
PAUSE_IMAGE_TAG = "3.10"


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


def etcd_manifest(cc, node, initial_cluster, cluster_state="new"):
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
    image = "%s/etcd:%s" % (cc["imageRepository"], ETCD_IMAGE_TAG)
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
