"""`microk8s enable|disable`: enable.py/disable.py, common/utils.py xable (in
https://github.com/canonical/microk8s/tree/master/scripts/wrappers) and the addon scripts.
Addon effects on Kubernetes are the resource names `kubectl get all` would list; they live in
the replicated datastore so every control-plane node sees them."""

import contextlib
import ipaddress
import os
import re
import shutil
import subprocess
import sys

from . import catalog, common, datastore, layout
from . import mkcommon as mk

COMMUNITY_HINT = (
    "To use the community maintained flavor enable the respective repository:",
    "",
    "    microk8s enable community",
    "",
)

HELP = {
    "enable": (
        "Usage: microk8s enable [OPTIONS] ADDONS...",
        "",
        "  Enable a MicroK8s addon.",
        "",
        "  For a list of available addons, run `microk8s status`.",
        "",
        "  To see help for individual addons, run:",
        "",
        "      microk8s enable ADDON -- --help",
        "",
        "Options:",
        "  -h, --help  Show this message and exit.",
    ),
    "disable": (
        "Usage: microk8s disable [OPTIONS] ADDONS...",
        "",
        "  Disable one or more MicroK8s addons.",
        "",
        "  For a list of available addons, run `microk8s status`.",
        "",
        "  To see help for individual addons, run:",
        "",
        "      microk8s disable ADDON -- --help",
        "",
        "Options:",
        "  -h, --help  Show this message and exit.",
    ),
}


# --------------------------------------------------------------------------- resources


def add_resources(*names):
    def mut(ds):
        for n in names:
            if n not in ds["resources"]:
                ds["resources"].append(n)

    mk.update_datastore(mut)


def drop_resources(*fragments):
    def mut(ds):
        ds["resources"] = [r for r in ds["resources"] if not any(f in r for f in fragments)]

    mk.update_datastore(mut)


def storage_classes():
    ds = datastore.load() or {"resources": []}
    prefix = "storageclass.storage.k8s.io/"
    return [r[len(prefix):] for r in ds["resources"] if r.startswith(prefix)]


def created(*names):
    common.out(*["{} created".format(n) for n in names])


def deleted(*names):
    out = []
    for n in names:
        kind, _, name = n.partition("/")
        out.append('{} "{}" deleted'.format(kind, name))
    common.out(*out)


def nested(action, args):
    """An addon script calling `microk8s-<action>.wrapper args`; returns its exit code."""
    try:
        return run(action, list(args), nested_call=True)
    except mk.Exit as e:
        return e.code
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1


def read_answer(prompt):
    # bash `read -p` shows its prompt (on stderr) only when stdin is a terminal.
    if sys.stdin is None or sys.stdin.closed:
        return None
    if sys.stdin.isatty():
        sys.stderr.write(prompt)
        sys.stderr.flush()
    try:
        line = sys.stdin.readline()
    except OSError:
        return None
    if not line:
        return None
    return line.rstrip("\n")


def first_arg_words(args):
    # `read -ra ARGUMENTS <<< "$1"`
    return args[0].split() if args else []


# --------------------------------------------------------------------------- addon scripts


def dns_enable(args):
    common.out("Enabling DNS")
    words = first_arg_words(args)
    if not words or words == ["/etc/resolv.conf"]:
        resolv = common.get_arg("kubelet", "--resolv-conf")
        if resolv:
            common.out("Using host configuration from {}".format(resolv))
        else:
            host = layout.find_resolv_conf()
            if host:
                common.out("Using host configuration from {}".format(host))
                common.set_arg("kubelet", "--resolv-conf", host)
            else:
                common.out(
                    "No valid resolv.conf file could be found",
                    "Falling back to 8.8.8.8 8.8.4.4 as upstream nameservers",
                )
    else:
        nameservers = ""
        for ns in " ".join(words).replace(",", " ").split():
            if not _routable(ns):
                common.out("Your input value ({}) is not a valid and reachable IP address".format(ns))
                return 1
            nameservers += " " + ns
        common.out("Will use {} as upstream nameservers".format(nameservers))
    dns_ip = args[1] if len(args) > 1 and args[1] else "10.152.183.10"
    domain = args[2] if len(args) > 2 and args[2] else "cluster.local"
    common.out("Applying manifest")
    created(
        "serviceaccount/coredns", "configmap/coredns", "deployment.apps/coredns", "service/kube-dns",
        "clusterrole.rbac.authorization.k8s.io/coredns", "clusterrolebinding.rbac.authorization.k8s.io/coredns",
    )
    add_resources(*layout.DNS_RESOURCES)
    common.out("CoreDNS service deployed with IP address {}".format(dns_ip))
    needs_restart = (
        common.get_arg("kubelet", "--cluster-domain") != domain or common.get_arg("kubelet", "--cluster-dns") != dns_ip
    )
    common.set_arg("kubelet", "--cluster-domain", domain)
    common.set_arg("kubelet", "--cluster-dns", dns_ip)
    if mk.is_worker() or needs_restart:
        common.out("Restarting kubelet")
    common.out("DNS is enabled")
    return 0


def _routable(ns):
    try:
        ipaddress.ip_address(ns)
    except ValueError:
        return False
    try:
        return subprocess.run(["ip", "route", "get", ns], capture_output=True, check=False).returncode == 0
    except OSError:
        return True


def dns_disable(args):
    common.out("Disabling DNS", "Reconfiguring kubelet", "Removing DNS manifest")
    deleted(
        "deployment.apps/coredns", "serviceaccount/coredns", "configmap/coredns", "service/kube-dns",
        "clusterrole.rbac.authorization.k8s.io/coredns", "clusterrolebinding.rbac.authorization.k8s.io/coredns",
    )
    drop_resources("coredns", "kube-dns")
    common.set_arg("kubelet", "--cluster-domain", None)
    common.set_arg("kubelet", "--cluster-dns", None)
    common.out("DNS is disabled")
    return 0


HOSTPATH_OBJECTS = (
    "deployment.apps/hostpath-provisioner",
    "storageclass.storage.k8s.io/microk8s-hostpath",
    "serviceaccount/microk8s-hostpath",
    "clusterrole.rbac.authorization.k8s.io/microk8s-hostpath",
    "clusterrolebinding.rbac.authorization.k8s.io/microk8s-hostpath",
)


def hostpath_enable(args):
    reclaim, default = "Delete", "true"
    i = 0
    while i < len(args):
        a = args[i]
        key, eq, val = a.partition("=")
        if key in ("-r", "--reclaim-policy", "-d", "--default-class"):
            if not eq:
                i += 1
                val = args[i] if i < len(args) else ""
            if key in ("-r", "--reclaim-policy"):
                reclaim = val
            else:
                default = val
        elif a in ("-h", "--help"):
            common.out(
                "Options:",
                " -h, --help            Show this help",
                " -r, --reclaim-policy  Set the reclaim policy. Available options are Delete (default) and Retain.",
                " -d, --default-class   Set the storage class as default. Available options are true (default) and false.",
            )
            return 0
        else:
            common.err("getopt: unrecognized option '{}'".format(a))
            common.out("invalid option -- {}".format(a))
            return 1
        i += 1
    if reclaim not in ("Delete", "Retain"):
        common.out(
            "",
            "Please check submitted arguments.",
            "You can use '--reclaim-policy' to set the reclaim policy. Allowed values: Delete Retain. Defaults to 'Delete'.",
            "   microk8s enable hostpath-storage --reclaim-policy=Retain",
        )
        return 1
    if default not in ("true", "false"):
        common.out(
            "",
            "Please check submitted arguments.",
            "You can use '--default-class' to set the storage class as default. Allowed values: true false. Defaults to 'true'.",
            "   microk8s enable hostpath-storage --default-class=true",
        )
        return 1
    common.out(
        "Enabling default storage class.",
        "WARNING: Hostpath storage is not suitable for production environments.",
        "         A hostpath volume can grow beyond the size limit set in the volume claim manifest.",
        "",
    )
    os.makedirs(os.path.join(common.snap_common(), "default-storage"), exist_ok=True)
    created(*HOSTPATH_OBJECTS)
    add_resources(*HOSTPATH_OBJECTS, "pod/hostpath-provisioner-7df77bc496-xq2mt")
    common.out("Storage will be available soon.")
    if mk.is_worker():
        common.out("", "WARNING: The storage class enabled does not persist volumes across nodes.", "")
    return 0


def hostpath_disable(args):
    common.out("Disabling default storage")
    deleted(*HOSTPATH_OBJECTS)
    drop_resources("hostpath-provisioner", "microk8s-hostpath")
    common.out("Storage removed")
    storage_dir = os.path.join(common.snap_common(), "default-storage")
    if first_arg_words(args) != ["destroy-storage"]:
        answer = read_answer("Remove PVC storage at {} ? (Y/N): ".format(storage_dir))
        if answer is None or not re.fullmatch(r"[yY]|[yY][eE][sS]", answer):
            return 1
    shutil.rmtree(storage_dir, ignore_errors=True)
    common.out("Storage space reclaimed")
    return 0


def storage_alias(action):
    def script(args):
        common.out(
            "DEPRECATION WARNING: 'storage' is deprecated and will soon be removed. "
            "Please use 'hostpath-storage' instead."
        )
        target = "hostpath-storage" + "".join(":" + a for a in args)
        return nested(action, [target])

    return script


def helm_enable(name):
    def script(args):
        common.out("Helm comes pre-installed with MicroK8s", "Helm 3 is enabled" if name == "helm3" else "Helm is enabled")
        return 0

    return script


def helm_disable(args):
    common.out("Helm comes pre-installed with MicroK8s")
    return 0


def ha_enable(args):
    # (constructed) switching back from etcd is not modelled on the real script.
    common.out("Enabling HA", "Upgrading the network CNI", "Waiting for the changes to apply", "HA enabled")
    common.touch(common.lock("ha-cluster"), 0o700)
    for name in ("no-etcd", "no-flanneld"):
        common.touch(common.lock(name), 0o700)
    common.set_arg("kube-apiserver", "--etcd-servers", '"unix://${SNAP_DATA}/var/kubernetes/backend/kine.sock:12379"')
    return 0


def ha_disable(args):
    force = any(a in ("-f", "--force") for a in args)
    ds = datastore.load() or {"nodes": []}
    if len(ds["nodes"]) == 1 and not force:
        common.out(
            "Disabling HA will reset your cluster in a clean state.",
            "Any running workloads will be stopped and any cluster configuration will be lost.",
            "As this is a single node cluster and this is a destructive operation,",
            "please use the '--force' flag.",
        )
        return 2
    # (constructed, simplified) the real script also runs `microk8s leave` and upgrade.py.
    common.out("Reverting to a non-HA setup", "Enabling flanneld and etcd")
    for name in ("no-etcd", "no-flanneld"):
        common.remove(common.lock(name))
    common.set_arg("kube-apiserver", "--etcd-servers", "https://127.0.0.1:12379")
    common.remove(common.lock("ha-cluster"))
    common.out("HA disabled")
    return 0


REGISTRY_SIZE = r"(^[2-9][0-9]{1,}|^[1-9][0-9]{2,})(Gi$)"


def registry_enable(args):
    size, storageclass = "20Gi", None
    i = 0
    while i < len(args):
        key, eq, val = args[i].partition("=")
        if key in ("--size", "--storageclass"):
            if not eq:
                i += 1
                val = args[i] if i < len(args) else ""
            if key == "--size":
                size = val
            else:
                storageclass = val
        elif key == "size" and eq:
            # (constructed wording) legacy `registry:size=40Gi`
            common.out(
                "WARNING: The 'registry:size=<size>' syntax is deprecated, "
                "use 'microk8s enable registry --size <size>' instead."
            )
            size = val
        else:
            common.out("Error: No such option: {}".format(args[i]))
            return 2
        i += 1
    if storageclass is None:
        nested("enable", ["hostpath-storage"])
    elif storageclass not in storage_classes():
        common.out("ERROR: Storage class {} doesn't exist.".format(storageclass))
        return 1
    if not re.match(REGISTRY_SIZE, size):
        common.out(
            "The size of the registry should be higher or equal to 20Gi and match the regex: {}".format(REGISTRY_SIZE)
        )
        return 1
    common.out("The registry will be created with the size of {}.".format(size))
    if storageclass is not None:
        common.out("Storage class {} will be used.".format(storageclass))
    else:
        common.out("Default storage class will be used.")
    created(
        "namespace/container-registry", "persistentvolumeclaim/registry-claim",
        "deployment.apps/registry", "service/registry",
    )
    common.out("configmap/local-registry-hosting configured")
    add_resources("deployment.apps/registry", "pod/registry-6c9fcc695f-p8hdv", "service/registry")
    return 0


def registry_disable(args):
    common.out("Disabling the private registry")
    deleted("namespace/container-registry", "persistentvolumeclaim/registry-claim", "deployment.apps/registry", "service/registry")
    drop_resources("registry")
    common.out(
        "The registry is disabled. Use 'microk8s disable hostpath-storage:destroy-storage' to free the storage space."
    )
    return 0


METALLB_RANGE = re.compile(r"^[0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*-[0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*$")
METALLB_CIDR = re.compile(r"^[0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\.[0-9]{1,3}/[0-9]{1,3}$")


def _ipv6_range(r):
    try:
        if "-" in r:
            a, b = r.split("-", 1)
            return ipaddress.ip_address(a).version == 6 and ipaddress.ip_address(b).version == 6
        return ipaddress.ip_network(r, strict=False).version == 6
    except ValueError:
        return False


def metallb_enable(args):
    common.out("Enabling MetalLB")
    words = first_arg_words(args)
    if words:
        ranges_in = " ".join(words)
    else:
        ranges_in = read_answer(
            "Enter each IP address range delimited by comma (e.g. '10.64.140.43-10.64.140.49,192.168.0.105-192.168.0.111'): "
        ) or ""
        if not ranges_in:
            common.out(
                "You have to input an IP Range value when asked, or provide it as an argument to the enable command, eg:",
                "  microk8s enable metallb:10.64.140.43-10.64.140.49,192.168.0.105-192.168.0.111",
                "You can also use CIDR notation, eg.",
                "  microk8s enable metallb:192.168.1.240/24",
            )
            return 1
    for r in ranges_in.replace(",", " ").split():
        if not (METALLB_RANGE.match(r) or METALLB_CIDR.match(r) or _ipv6_range(r)):
            common.out("Your input value ({}) is not a valid IP Range".format(r))
            return 1
    common.out("Applying Metallb manifest")
    created(
        *["customresourcedefinition.apiextensions.k8s.io/{}.metallb.io".format(c) for c in (
            "addresspools", "bfdprofiles", "bgpadvertisements", "bgppeers", "communities",
            "ipaddresspools", "l2advertisements")],
        "namespace/metallb-system", "serviceaccount/controller", "serviceaccount/speaker",
        "clusterrole.rbac.authorization.k8s.io/metallb-system:controller",
        "clusterrole.rbac.authorization.k8s.io/metallb-system:speaker",
        "role.rbac.authorization.k8s.io/controller", "role.rbac.authorization.k8s.io/pod-lister",
        "clusterrolebinding.rbac.authorization.k8s.io/metallb-system:controller",
        "clusterrolebinding.rbac.authorization.k8s.io/metallb-system:speaker",
        "rolebinding.rbac.authorization.k8s.io/controller", "secret/webhook-server-cert",
        "service/webhook-service", "rolebinding.rbac.authorization.k8s.io/pod-lister",
        "daemonset.apps/speaker", "deployment.apps/controller",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/validating-webhook-configuration",
    )
    common.out("Waiting for Metallb controller to be ready.", "deployment.apps/controller condition met")
    created("ipaddresspool.metallb.io/default-addresspool", "l2advertisement.metallb.io/default-advertise-all-pools")
    add_resources("pod/speaker-5xq7c", "pod/controller-5f7bb57799-2hvhb", "daemonset.apps/speaker", "deployment.apps/controller")
    common.out("MetalLB is enabled")
    return 0


def metallb_disable(args):
    common.out("Disabling MetalLB")
    deleted("namespace/metallb-system", "daemonset.apps/speaker", "deployment.apps/controller")
    drop_resources("speaker", "/controller")
    common.out("MetalLB is disabled")
    return 0


OBSERVABILITY_RESOURCES = (
    "statefulset.apps/prometheus-kube-prom-stack-kube-prome-prometheus",
    "pod/prometheus-kube-prom-stack-kube-prome-prometheus-0",
    "statefulset.apps/alertmanager-kube-prom-stack-kube-prome-alertmanager",
    "deployment.apps/kube-prom-stack-grafana",
    "statefulset.apps/loki",
    "statefulset.apps/tempo",
)


def observability_enable(args):
    for dep in ("core/dns", "core/helm3", "core/hostpath-storage"):
        rc = nested("enable", [dep])
        if rc:
            return rc
    common.out("Enabling observability")
    without_tempo = False
    for a in args:
        key = a.split("=", 1)[0]
        if a == "--without-tempo":
            without_tempo = True
        elif "=" in a and key in (
            "--kube-prometheus-stack-values", "--kube-prometheus-stack-version", "--loki-stack-values",
            "--loki-stack-version", "--tempo-values", "--tempo-version",
        ):
            continue
        else:
            common.err("Unknown option {}".format(a))
            return 1
    # (constructed) abbreviated helm output of the three releases
    for release in ("kube-prom-stack", "loki") + (() if without_tempo else ("tempo",)):
        common.out(
            'Release "{}" does not exist. Installing it now.'.format(release),
            "NAME: {}".format(release),
            "NAMESPACE: observability",
            "STATUS: deployed",
            "REVISION: 1",
        )
    resources = [r for r in OBSERVABILITY_RESOURCES if not (without_tempo and "tempo" in r)]
    add_resources(*resources)
    common.out(
        "",
        "Note: the observability stack is setup to monitor only the current nodes of the MicroK8s cluster.",
        "For any nodes joining the cluster at a later stage this addon will need to be set up again.",
        "",
        "Observability has been enabled (user/pass: admin/prom-operator)",
    )
    return 0


def observability_disable(args):
    common.out("Disabling observability")  # (constructed)
    for release in ("kube-prom-stack", "loki", "tempo"):
        common.out('release "{}" uninstalled'.format(release))
    drop_resources(*OBSERVABILITY_RESOURCES)
    common.out("Observability disabled")
    return 0


def prometheus_alias(action):
    def script(args):
        common.out("DEPRECATION WARNING: 'prometheus' is deprecated and will soon be removed. Please use 'observability' instead.")
        return nested(action, ["observability", *args])

    return script


def _rbac(enable):
    common.out("{} RBAC".format("Enabling" if enable else "Disabling"), "Reconfiguring apiserver")
    common.set_arg("kube-apiserver", "--authorization-mode", "RBAC,Node" if enable else "AlwaysAllow")
    (add_resources if enable else drop_resources)("clusterrole.rbac.authorization.k8s.io/cluster-admin")
    common.out("Restarting apiserver", "RBAC is {}".format("enabled" if enable else "disabled"))
    return 0


def rbac_enable(args):
    return _rbac(True)


def rbac_disable(args):
    return _rbac(False)


def community_enable(args):
    layout.write_addon_repo("community", mk.repo_track("core"))
    common.out("Community repository is now enabled")
    return 0


def community_disable(args):
    shutil.rmtree(os.path.join(common.snap_common(), "addons", "community"), ignore_errors=True)
    common.out("Community repository is now disabled")  # (constructed)
    return 0


INGRESS_OBJECTS = (
    "ingressclass.networking.k8s.io/public", "ingressclass.networking.k8s.io/nginx", "namespace/ingress",
    "serviceaccount/nginx-ingress-microk8s-serviceaccount",
    "clusterrole.rbac.authorization.k8s.io/nginx-ingress-microk8s-clusterrole",
    "role.rbac.authorization.k8s.io/nginx-ingress-microk8s-role",
    "clusterrolebinding.rbac.authorization.k8s.io/nginx-ingress-microk8s",
    "rolebinding.rbac.authorization.k8s.io/nginx-ingress-microk8s",
    "configmap/nginx-load-balancer-microk8s-conf", "configmap/nginx-ingress-tcp-microk8s-conf",
    "configmap/nginx-ingress-udp-microk8s-conf", "daemonset.apps/nginx-ingress-microk8s-controller",
)


def ingress_enable(args):
    for a in args:
        key = a.split("=", 1)[0]
        if key != "default-ssl-certificate":
            common.out(
                "Unknown argument '{}'.".format(key),
                "You can use `default-ssl-certificate` to specify the default SSL certificate for the nginx ingress controller:",
                "    microk8s enable ingress:default-ssl-certificate=namespace/secret_name",
            )
            return 1
    common.out("Enabling Ingress")
    created(*INGRESS_OBJECTS)
    add_resources("pod/nginx-ingress-microk8s-controller-8k4tz", "daemonset.apps/nginx-ingress-microk8s-controller")
    common.out("Ingress is enabled")
    return 0


def ingress_disable(args):
    common.out("Disabling Ingress")
    deleted(*INGRESS_OBJECTS)
    drop_resources("nginx-ingress-microk8s")
    common.out("Ingress is disabled")
    return 0


METRICS_OBJECTS = (
    "serviceaccount/metrics-server",
    "clusterrole.rbac.authorization.k8s.io/system:aggregated-metrics-reader",
    "clusterrole.rbac.authorization.k8s.io/system:metrics-server",
    "rolebinding.rbac.authorization.k8s.io/metrics-server-auth-reader",
    "clusterrolebinding.rbac.authorization.k8s.io/metrics-server:system:auth-delegator",
    "clusterrolebinding.rbac.authorization.k8s.io/system:metrics-server",
    "service/metrics-server", "deployment.apps/metrics-server",
    "apiservice.apiregistration.k8s.io/v1beta1.metrics.k8s.io",
    "clusterrolebinding.rbac.authorization.k8s.io/microk8s-admin",
)


def metrics_enable(args):
    common.out("Enabling Metrics-Server")
    created(*METRICS_OBJECTS)
    add_resources("pod/metrics-server-6b6844c455-fz4kz", "deployment.apps/metrics-server", "service/metrics-server")
    common.out("Metrics-Server is enabled")
    return 0


def metrics_disable(args):
    common.out("Disabling Metrics-Server")
    deleted(*METRICS_OBJECTS)
    drop_resources("metrics-server")
    common.out("Metrics-Server is disabled")
    return 0


def dashboard_enable(args):
    common.out("Enabling Kubernetes Dashboard")
    rc = nested("enable", ["metrics-server"])
    if rc:
        return rc
    common.out("Applying manifest")
    created(
        "serviceaccount/kubernetes-dashboard", "service/kubernetes-dashboard", "secret/kubernetes-dashboard-certs",
        "deployment.apps/kubernetes-dashboard", "service/dashboard-metrics-scraper",
        "deployment.apps/dashboard-metrics-scraper", "secret/microk8s-dashboard-token",
    )
    add_resources("pod/kubernetes-dashboard-54b48fbf9-2tdwx", "deployment.apps/kubernetes-dashboard")
    # (constructed from memory of the 1.31 script)
    common.out(
        "",
        "If RBAC is not enabled access the dashboard using the token retrieved with:",
        "",
        "microk8s kubectl describe secret -n kube-system microk8s-dashboard-token",
        "",
        "Use this token in the https login UI of the kubernetes-dashboard service.",
        "",
        "In an RBAC enabled setup (microk8s enable RBAC) you need to create a user with restricted",
        "permissions as shown in:",
        "https://github.com/kubernetes/dashboard/blob/master/docs/user/access-control/creating-sample-user.md",
        "",
    )
    return 0


def dashboard_disable(args):
    common.out("Disabling Dashboard")
    deleted("deployment.apps/kubernetes-dashboard", "service/kubernetes-dashboard")
    drop_resources("kubernetes-dashboard")
    common.out("Dashboard is disabled")
    return 0


def _generic_resources(addon):
    check = addon["check_status"].strip()
    if "/" not in check:
        return ["pod/gpu-{}-worker-2kq9x".format(check)]
    kind = check.split("/", 1)[0]
    if kind == "pod":
        return [check + "-6d9f7c5b8-qz4lm"]
    return [check]


def generic(addon, action):
    """(constructed) addons whose scripts the stand-in does not imitate."""
    title = addon["name"]

    def script(args):
        check = addon["check_status"]
        if check.startswith("${"):
            path = common.expand_snap_vars(check)
            if action == "enable":
                common.out("Enabling {}".format(title))
                common.touch(path, 0o600)
                common.out("{} is enabled".format(title))
            else:
                common.out("Disabling {}".format(title))
                common.remove(path)
                common.out("{} is disabled".format(title))
            return 0
        res = _generic_resources(addon)
        if action == "enable":
            common.out("Enabling {}".format(title))
            created(*res)
            add_resources(*res)
            common.out("{} is enabled".format(title))
        else:
            common.out("Disabling {}".format(title))
            deleted(*res)
            drop_resources(*res)
            common.out("{} is disabled".format(title))
        return 0

    return script


SCRIPTS = {
    ("core", "dns"): (dns_enable, dns_disable),
    ("core", "hostpath-storage"): (hostpath_enable, hostpath_disable),
    ("core", "storage"): (storage_alias("enable"), storage_alias("disable")),
    ("core", "helm"): (helm_enable("helm"), helm_disable),
    ("core", "helm3"): (helm_enable("helm3"), helm_disable),
    ("core", "ha-cluster"): (ha_enable, ha_disable),
    ("core", "registry"): (registry_enable, registry_disable),
    ("core", "metallb"): (metallb_enable, metallb_disable),
    ("core", "observability"): (observability_enable, observability_disable),
    ("core", "prometheus"): (prometheus_alias("enable"), prometheus_alias("disable")),
    ("core", "rbac"): (rbac_enable, rbac_disable),
    ("core", "community"): (community_enable, community_disable),
    ("core", "ingress"): (ingress_enable, ingress_disable),
    ("core", "metrics-server"): (metrics_enable, metrics_disable),
    ("core", "dashboard"): (dashboard_enable, dashboard_disable),
}


def run_script(addon, action, args):
    pair = SCRIPTS.get((addon["repository"], addon["name"]))
    script = (pair[0] if action == "enable" else pair[1]) if pair else generic(addon, action)
    rc = script(list(args))
    mk.flush()
    return rc or 0


# --------------------------------------------------------------------------- xable


def is_community_addon(name):
    if not os.path.isfile(os.path.join(common.snap(), "addons", "community", "addons.yaml")):
        return False
    return any(a["name"] == name for a in catalog.repository("community", mk.repo_track("core")))


def parse_single(arg, available):
    name, *args = arg.split(":")
    parts = name.split("/")
    if len(parts) == 2:
        return parts[0], parts[1], args
    if len(parts) == 1:
        repos = [r for (r, a) in available if a == name]
        if not repos:
            common.err("Addon {} was not found in any repository".format(name))
            if is_community_addon(name):
                common.out(*COMMUNITY_HINT)
            raise mk.Exit(1)
        if len(repos) == 1:
            common.err("Infer repository {} for addon {}".format(repos[0], name))
            return repos[0], name, args
        common.err(
            "Addon {} exists in more than repository. Please explicitly specify".format(name),
            "the repository using any of:",
            "",
            *["    {}/{}".format(r, name) for r in repos],
            "",
        )
        raise mk.Exit(1)
    common.out("Invalid addon name {}".format(name))
    raise mk.Exit(1)


def parse_xable_addon_args(addon_args, available):
    names = [a for (_, a) in available] + ["{}/{}".format(r, a) for (r, a) in available]
    wanted = [arg.split(":")[0] for arg in addon_args]
    if set(wanted) < set(names):
        return [parse_single(arg, available) for arg in addon_args]
    repo, name, args = parse_single(addon_args[0], available)
    if args and addon_args[1:]:
        common.out(
            "Can't pass string arguments and flag arguments simultaneously!",
            "Enable or disable addons with only one argument style at a time:",
            "",
            "    microk8s enable foo:'bar'",
            "or",
            "    microk8s enable foo --bar",
            "",
        )
        raise mk.Exit(1)
    return [(repo, name, addon_args[1:])]


def xable(action, addon_args):
    info = mk.available_addons()
    enabled, disabled = mk.get_status(info, True)
    xabled = {(a["repository"], a["name"]) for a in (enabled if action == "enable" else disabled)}
    available = [(a["repository"], a["name"]) for a in info]
    by_key = {(a["repository"], a["name"]): a for a in info}
    addons = parse_xable_addon_args(addon_args, available)
    if len(addons) > 1:
        common.out(
            "WARNING: Do not enable or disable multiple addons in one command.",
            "         This form of chained operations on addons will be DEPRECATED in the future.",
            "         Please, {0} one addon at a time: 'microk8s {0} <addon>'".format(action),
        )
    for repo, name, args in addons:
        if (repo, name) not in by_key:
            common.out("Addon {}/{} not found".format(repo, name))
            continue
        if (repo, name) in xabled:
            common.out("Addon {}/{} is already {}d".format(repo, name, action))
            continue
        mk.wait_for_ready(30, with_ready_node=False)
        rc = run_script(by_key[(repo, name)], action, args)
        if rc:
            raise mk.Exit(rc)
        mk.wait_for_ready(30, with_ready_node=False)
    return 0


@contextlib.contextmanager
def addon_lock(nested_call):
    if nested_call:
        yield
        return
    with common.flocked(common.lock(".microk8s-addon-lock")):
        yield


def run(action, argv, nested_call=False):
    if not nested_call:
        mk.exit_if_no_permissions()
    # click: -h/--help before `--` is the command's own help; `--` itself is dropped.
    before = argv[: argv.index("--")] if "--" in argv else argv
    if "-h" in before or "--help" in before:
        common.out(*HELP[action])
        return 0
    if "--" in argv:
        argv = argv[: argv.index("--")] + argv[argv.index("--") + 1 :]
    if not argv:
        common.err(
            "Usage: microk8s {} [OPTIONS] ADDONS...".format(action),
            "Try 'microk8s {} -h' for help.".format(action),
            "",
            "Error: Missing argument 'ADDONS...'.",
        )
        return 2
    if "-h" in argv or "--help" in argv:
        common.out(
            "Addon {} does not yet have a help message.".format(argv[0]),
            "For more information about it, visit https://microk8s.io/docs/addons",
        )
        return 0
    if mk.is_worker():
        common.out("This MicroK8s deployment is acting as a node in a cluster.", "Please use the master node.")
        return 1
    mk.exit_if_no_permission_py()
    if mk.is_stopped():
        common.err(mk.STOPPED)
        return 1
    mk.wait_for_ready(30, with_ready_node=False)
    with addon_lock(nested_call):
        return xable(action, argv)


def main(action, argv):
    try:
        return run(action, argv)
    except mk.Exit as e:
        return e.code
