"""Snap versions per track and the addon catalogues (the addons.yaml of
https://github.com/canonical/microk8s-core-addons)."""

import platform

# track -> (version, revision).  1.31 and 1.32 are sample values of those tracks;
# the 1.33/1.34 versions and revisions are invented but plausible (constructed).
TRACKS = {
    "1.31": ("v1.31.9", 8148),
    "1.32": ("v1.32.9", 8300),
    "1.33": ("v1.33.5", 8420),
    "1.34": ("v1.34.1", 8510),
}
LATEST_TRACK = "1.34"
RISKS = ("stable", "candidate", "beta", "edge")


def track_minor(track):
    return LATEST_TRACK if track == "latest" else track


# name, description, version, check_status, archs (None = all), confinement (None = both)
_CORE_131 = [
    ("cert-manager", "Cloud native certificate management", "1.8.0", "deployment.apps/cert-manager"),
    ("cis-hardening", "Apply CIS K8s hardening", "1.0.0", "${SNAP_DATA}/var/lock/cis-hardening"),
    ("community", "The community addons repository", "", "${SNAP_COMMON}/addons/community/addons.yaml"),
    ("dashboard", "The Kubernetes dashboard", "2.6.0", "pod/kubernetes-dashboard"),
    ("dns", "CoreDNS", "1.10.1", "pod/coredns"),
    ("gpu", "Alias to nvidia add-on", "22.9.1", "operator-node-feature-discovery"),
    ("ha-cluster", "Configure high availability on the current node", "0.1.0", "${SNAP_DATA}/var/lock/ha-cluster"),
    ("helm", "Helm - the package manager for Kubernetes", "3.9.1", "${SNAP}/bin/helm"),
    ("helm3", "Helm 3 - the package manager for Kubernetes", "3.9.1", "${SNAP}/bin/helm"),
    ("host-access", "Allow Pods connecting to Host services smoothly", "1.0.0", "${SNAP_DATA}/var/lock/host-access-enabled"),
    ("hostpath-storage", "Storage class; allocates storage from host directory", "1.4.2", "deployment.apps/hostpath-provisioner"),
    ("ingress", "Ingress controller for external access", "1.8.0", "pod/nginx-ingress-microk8s-controller"),
    ("kube-ovn", "An advanced network fabric for Kubernetes", "1.10.0-alpha1", "deployment.apps/kube-ovn-controller"),
    ("mayastor", "OpenEBS MayaStor", "2.0.0-microk8s-1", "daemonset.apps/mayastor"),
    ("metallb", "Loadbalancer for your Kubernetes cluster", "0.13.3", "pod/speaker"),
    ("metrics-server", "K8s Metrics Server for API access to service metrics", "0.6.3", "pod/metrics-server"),
    ("minio", "MinIO object storage", "4.5.1", "deployment.apps/minio-operator"),
    ("nvidia", "NVIDIA hardware (GPU and network) support", "gpu=22.9.1/network=23.7.0/microk8s-1", "operator-node-feature-discovery"),
    ("observability", "A lightweight observability stack for logs, traces and metrics", "0.57.0", "statefulset.apps/prometheus-kube-prom-stack-kube-prome-prometheus"),
    ("prometheus", "Prometheus operator for monitoring and logging", "v0.8.0", "pod/prometheus-k8s-0"),
    ("rbac", "Role-Based Access Control for authorisation", "", "clusterrole.rbac.authorization.k8s.io/cluster-admin"),
    ("registry", "Private image registry exposed on localhost:32000", "2.8.1", "deployment.apps/registry"),
    ("rook-ceph", "Distributed Ceph storage using Rook", "1.11.9", "deployment.apps/rook-ceph-operator"),
    ("storage", "Alias to hostpath-storage add-on, deprecated", "1.4.0", "deployment.apps/hostpath-provisioner"),
]
_AMD64_ONLY = {"nvidia", "gpu"}

# Version bumps known for 1.34 (microk8s-core-addons' addons.yaml); 1.32/1.33 reuse the 1.31
# values (approximation).
_VERSION_OVERRIDES = {
    "1.34": {
        "dns": "1.12.3",
        "helm": "3.18.6",
        "helm3": "3.18.6",
        "hostpath-storage": "1.5.0",
        "metallb": "0.15.2",
        "observability": "76.4.1",
        "ingress": "1.13.1",
    }
}

# CC addons.yaml (main); `sosivio` of the 1.31 list is missing there, its text is constructed.
_COMMUNITY = [
    ("argocd", "Argo CD is a declarative continuous deployment for Kubernetes.", "2.7.2", "deployment.apps/argo-cd-argocd-server"),
    ("cilium", "SDN, fast with full network policy", "1.15.2", "pod/cilium"),
    ("cloudnative-pg", "PostgreSQL operator CloudNativePG", "0.0.1", "deployment.apps/cnpg-controller-manager"),
    ("dashboard-ingress", "Ingress definition for Kubernetes dashboard", "1.0.0", "ingress.networking.k8s.io/kubernetes-dashboard-ingress"),
    ("easyhaproxy", "EasyHAProxy can configure HAProxy automatically based on ingress labels", "0.1.5", "pod/ingress-easyhaproxy"),
    ("falco", "Cloud-native runtime threat detection tool for Linux and K8s", "4.5.1", "daemonset.apps/falco"),
    ("fluentd", "Elasticsearch-Fluentd-Kibana logging and monitoring", "3.1.0", "daemonset.apps/fluentd-es-v3.1.0"),
    ("gopaddle", "Low-Code Kubernetes IDE with AI Co-pilot", "5.0", "deployment.apps/gopaddle"),
    ("inaccel", "Simplifying FPGA management in Kubernetes", "", "daemonset.apps/fpga-operator"),
    ("istio", "Core Istio service mesh services", "1.18.2", "${SNAP_DATA}/bin/istioctl"),
    ("jaeger", "Kubernetes Jaeger operator with its simple config", "1.36.0", "pod/jaeger-operator"),
    ("kata", "Kata Containers is a secure runtime with lightweight VMS", "latest/stable", "${SNAP_DATA}/var/lock/kata.enabled"),
    ("keda", "Kubernetes-based Event Driven Autoscaling", "2.12.0", "pod/keda-operator"),
    ("knative", "Knative Serverless and Event Driven Applications", "1.6.0", "deployment.apps/knative-operator"),
    ("kubearmor", "Cloud-native runtime security enforcement system for k8s", "0.10.2", "daemonset.apps/kubearmor"),
    ("kwasm", "WebAssembly support for WasmEdge (Docker Wasm) and Spin (Azure AKS WASI)", "0.2.0", "deployment.apps/kwasm-operator"),
    ("linkerd", "Linkerd is a service mesh for Kubernetes and other frameworks", "2.14.3", "pod/linkerd-destination"),
    ("microcks", "Open source Kubernetes Native tool for API Mocking and Testing", "1.7.1", "deployment.apps/microcks"),
    ("multus", "Multus CNI enables attaching multiple network interfaces to pods", "3.9", "${SNAP_DATA}/args/cni-network/00-multus.conf"),
    ("nfs", "NFS Server Provisioner", "1.4.0", "statefulset.apps/nfs-server-provisioner"),
    ("ngrok", "ngrok Ingress Controller instantly adds connectivity, load balancing, authentication, and observability to your services", "0.0.1", "deployment.apps/ngrok-ingress-controller-kubernetes-ingress-controller-manager"),
    ("openebs", "OpenEBS is the open-source storage solution for Kubernetes", "2.6.0", "pod/openebs-ndm"),
    ("openfaas", "OpenFaaS serverless framework", "6.2.2", "pod/gateway"),
    ("osm-edge", "osm-edge is a lightweight SMI compatible service mesh for the edge-computing.", "1.1.0", "pod/osm-controller"),
    ("parking", "Static webserver to park a domain. Works with EasyHAProxy.", "0.1.0", "deployment.apps/parking-static-httpserver"),
    ("portainer", "Portainer UI for your Kubernetes cluster", "2.0.0", "deployment.apps/portainer "),
    ("shifu", "Kubernetes native IoT software development framework.", "0.11.0", "deployment.apps/shifu-crd-controller-manager"),
    ("sosivio", "Kubernetes Predictive Troubleshooting, Observability, and Resource Optimization", "1.7.0", "deployment.apps/sosivio-dashboard"),
    ("sriov-device-plugin", "SR-IOV Network Device Plugin.", "3.7.0", "daemonset.apps/kube-sriov-device-plugin"),
    ("stunner", "A Kubernetes media gateway for WebRTC", "0.0.1", "deployment.apps/stunner-gateway-operator-controller-manager"),
    ("traefik", "traefik Ingress controller", "2.9.6", "deployment.apps/traefik"),
    ("trivy", "Kubernetes-native security scanner", "0.15.1", "deployment.apps/trivy-operator"),
]


def current_arch():
    return {"aarch64": "arm64", "x86_64": "amd64", "armv7l": "armhf"}.get(
        platform.machine(), platform.machine()
    )


def repository(repo, track):
    """Addon dicts of one repository for a snap track, arch-filtered."""
    minor = track_minor(track)
    rows = _CORE_131 if repo == "core" else _COMMUNITY if repo == "community" else []
    overrides = _VERSION_OVERRIDES.get(minor, {}) if repo == "core" else {}
    arch = current_arch()
    addons = []
    for name, desc, version, check in rows:
        if repo == "core" and name in _AMD64_ONLY and arch != "amd64":
            continue
        addons.append(
            {
                "name": name,
                "description": desc,
                "version": overrides.get(name, version),
                "check_status": check,
                "repository": repo,
            }
        )
    return addons


def addons_yaml(repo, track):
    """addons.yaml written into the repository dirs (file shape of the real repos)."""
    lines = ["microk8s-addons:", '  description: "List of all addons included in Microk8s."', "  addons:"]
    for a in repository(repo, track):
        lines += [
            '    - name: "{}"'.format(a["name"]),
            '      description: "{}"'.format(a["description"]),
            '      version: "{}"'.format(a["version"]),
            '      check_status: "{}"'.format(a["check_status"]),
            "      supported_architectures:",
            "        - {}".format(current_arch()),
            "",
        ]
    return "\n".join(lines)
