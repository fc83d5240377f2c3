"""Tests of the `snap`/`microk8s` stand-ins against what the real snap and microk8s print (the
microk8s paths named below are in https://github.com/canonical/microk8s).

Every node is a directory under tmp_path used as KOS_STANDIN_ROOT, with its own 127.x.y.z
address (KOS_STANDIN_IP); joins really go over HTTPS between the nodes' cluster agents.
"""

import datetime
import hashlib
import json
import os
import platform
import random
import re
import socket
import ssl
import struct
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from tests.standins.microk8s_outputs import FRESH_YAML_START, NOT_RUNNING_YAML

STANDINS = Path(__file__).resolve().parent
sys.path.insert(0, str(STANDINS / "lib"))

from microk8s_standin import agent as standin_agent  # noqa: E402
from microk8s_standin.pki import CSR_CONF_TEMPLATE  # noqa: E402

SNAP = str(STANDINS / "bin" / "snap")

# `microk8s status` of a fresh node, as scripts/wrappers/status.py prints it (amd64 catalogue of
# the 1.31 track).
FRESH_PRETTY = """\
microk8s is running
high-availability: no
  datastore master nodes: 127.0.0.1:19001
  datastore standby nodes: none
addons:
  enabled:
    dns                  # (core) CoreDNS
    ha-cluster           # (core) Configure high availability on the current node
    helm                 # (core) Helm - the package manager for Kubernetes
    helm3                # (core) Helm 3 - the package manager for Kubernetes
  disabled:
    cert-manager         # (core) Cloud native certificate management
    cis-hardening        # (core) Apply CIS K8s hardening
    community            # (core) The community addons repository
    dashboard            # (core) The Kubernetes dashboard
    gpu                  # (core) Alias to nvidia add-on
    host-access          # (core) Allow Pods connecting to Host services smoothly
    hostpath-storage     # (core) Storage class; allocates storage from host directory
    ingress              # (core) Ingress controller for external access
    kube-ovn             # (core) An advanced network fabric for Kubernetes
    mayastor             # (core) OpenEBS MayaStor
    metallb              # (core) Loadbalancer for your Kubernetes cluster
    metrics-server       # (core) K8s Metrics Server for API access to service metrics
    minio                # (core) MinIO object storage
    nvidia               # (core) NVIDIA hardware (GPU and network) support
    observability        # (core) A lightweight observability stack for logs, traces and metrics
    prometheus           # (core) Prometheus operator for monitoring and logging
    rbac                 # (core) Role-Based Access Control for authorisation
    registry             # (core) Private image registry exposed on localhost:32000
    rook-ceph            # (core) Distributed Ceph storage using Rook
    storage              # (core) Alias to hostpath-storage add-on, deprecated
"""

# The head of `microk8s status --format yaml` of a fresh node (amd64 catalogue, 1.31 track).
FRESH_YAML_HEAD = FRESH_YAML_START + """\
  - name: ha-cluster
    repository: core
    description: Configure high availability on the current node
    version: 0.1.0
    status: enabled
  - name: helm
    repository: core
    description: Helm - the package manager for Kubernetes
    version: 3.9.1
    status: enabled
  - name: helm3
    repository: core
    description: Helm 3 - the package manager for Kubernetes
    version: 3.9.1
    status: enabled
  - name: cert-manager
    repository: core
    description: Cloud native certificate management
    version: 1.8.0
    status: disabled
  - name: cis-hardening
    repository: core
    description: Apply CIS K8s hardening
    version: 1.0.0
    status: disabled
  - name: community
    repository: core
    description: The community addons repository
    version:  
    status: disabled
"""

WORKER_JOIN = """\
Contacting cluster at {ip}

The node has joined the cluster and will appear in the nodes list in a few seconds.

This worker node gets automatically configured with the API server endpoints.
If the API servers are behind a loadbalancer please set the '--refresh-interval' to '0s' in:
    /var/snap/microk8s/current/args/apiserver-proxy
and replace the API server endpoints with the one provided by the loadbalancer in:
    /var/snap/microk8s/current/args/traefik/provider.yaml

Successfully joined the cluster.
"""

CP_JOIN = """\
Contacting cluster at {ip}
Waiting for this node to finish joining the cluster.  
Successfully joined the cluster.
"""


class Node:
    def __init__(self, root, ip, name):
        self.root = root
        self.ip = ip
        self.name = name

    def env(self, **extra):
        env = {k: v for k, v in os.environ.items() if not k.startswith("KOS_STANDIN_")}
        env.update(
            KOS_STANDIN_ROOT=str(self.root),
            KOS_STANDIN_IP=self.ip,
            PATH="{}:{}:/usr/bin:/bin:/usr/sbin:/sbin".format(STANDINS / "bin", self.root / "snap" / "bin"),
            PYTHONDONTWRITEBYTECODE="1",
            LANG="C.UTF-8",
        )
        env.update(extra)
        return env

    def run(self, *argv, stdin=subprocess.DEVNULL, input=None, env=None, **kw):
        return subprocess.run(
            list(argv),
            env=self.env(**(env or {})),
            stdin=None if input is not None else stdin,
            input=input,
            capture_output=True,
            text=True,
            timeout=60,
            **kw,
        )

    def snap(self, *args, **kw):
        return self.run(SNAP, *args, **kw)

    def mk(self, *args, **kw):
        return self.run(str(self.root / "snap" / "bin" / "microk8s"), *args, **kw)

    def data(self, rel=""):
        return self.root / "var" / "snap" / "microk8s" / "current" / rel

    def set_bind(self):
        """Point args/cluster-agent at this node's address, as multi-node tests on one host must."""
        path = self.data("args/cluster-agent")
        path.write_text(path.read_text().replace("--bind 0.0.0.0:25000", "--bind {}:25000".format(self.ip)))
        assert self.snap("restart", "microk8s").returncode == 0

    def join_string(self, *extra):
        r = self.mk("add-node", "--format", "token-check", *extra)
        assert r.returncode == 0, r.stderr
        return "{}:25000/{}".format(self.ip, r.stdout.strip())


def write_hosts(*nodes):
    text = "127.0.0.1 localhost\n" + "".join("{} {}\n".format(n.ip, n.name) for n in nodes)
    for n in nodes:
        (n.root / "etc" / "hosts").write_text(text)


@pytest.fixture
def make_node(tmp_path):
    # A random 127.x.y.0/24 per test keeps agents of concurrent runs apart.
    prefix = "127.{}.{}.".format(random.randint(1, 254), random.randint(1, 254))
    made = []

    def make(name, host, install=True, channel="1.31/stable"):
        root = tmp_path / name
        (root / "etc").mkdir(parents=True)
        (root / "etc" / "hostname").write_text(name + "\n")
        node = Node(root, prefix + str(host), name)
        made.append(node)
        if install:
            r = node.snap("install", "microk8s", "--classic", "--channel={}".format(channel))
            assert r.returncode == 0, r.stderr
        return node

    yield make
    for node in made:
        standin_agent.kill_all_agents(str(node.root))


def agent_alive(node):
    return standin_agent.agent_pid(str(node.data())) is not None


def cert_check(node):
    der = subprocess.run(
        ["openssl", "x509", "-in", str(node.data("certs/server.crt")), "-outform", "der"],
        capture_output=True, check=True,
    ).stdout
    return hashlib.sha256(der).hexdigest()[:12]


# --------------------------------------------------------------------------- snap


def test_snap_install_list_refresh_remove(make_node):
    node = make_node("node-a", 2, install=False)

    r = node.snap("list")
    assert (r.returncode, r.stderr) == (0, "No snaps are installed yet. Try 'snap install hello-world'.\n")
    r = node.snap("list", "microk8s")
    assert (r.returncode, r.stdout, r.stderr) == (1, "", "error: no matching snaps installed\n")

    r = node.snap("install", "microk8s", "--channel=1.31/stable")
    assert r.returncode == 1
    assert r.stderr.startswith('error: This revision of snap "microk8s" was published using classic confinement\n')
    assert r.stderr.endswith("\n       --classic.\n")

    r = node.snap("install", "microk8s", "--classic", "--channel=1.31/stable")
    assert (r.returncode, r.stdout, r.stderr) == (0, "microk8s (1.31/stable) v1.31.9 from Canonical** installed\n", "")
    r = node.snap("install", "microk8s", "--classic", "--channel=1.31/stable")
    assert (r.returncode, r.stdout) == (0, "")
    assert r.stderr == "snap \"microk8s\" is already installed, see 'snap help refresh'\n"

    # install state
    assert os.readlink(node.root / "var/snap/microk8s/current") == "8148"
    for rel in (
        "var/lock/ha-cluster", "var/lock/lite.lock", "var/lock/no-apiserver-proxy", "var/lock/no-etcd",
        "var/lock/no-flanneld", "credentials/client.config", "certs/ca.crt", "certs/ca.key",
        "certs/server.crt", "certs/server.key", "certs/front-proxy-client.crt", "certs/csr.conf",
        "var/kubernetes/backend/cluster.yaml", "var/kubernetes/backend/info.yaml",
        "var/kubernetes/backend/cluster.crt", "args/kubelet", "args/kube-apiserver",
    ):
        assert node.data(rel).exists(), rel
    assert not node.data("var/lock/clustered.lock").exists()
    assert node.data("certs/csr.conf.template").read_text() == CSR_CONF_TEMPLATE
    assert "--bind 0.0.0.0:25000" in node.data("args/cluster-agent").read_text().splitlines()
    assert (node.root / "var/snap/microk8s/common/addons/core/addons.yaml").is_file()
    link = node.root / "snap/bin/microk8s"
    assert os.path.realpath(link) == str(STANDINS / "snap-apps" / "microk8s")
    assert agent_alive(node)
    assert node.mk("version").stdout == "MicroK8s v1.31.9 revision 8148\n"

    r = node.snap("list", "microk8s")
    assert r.returncode == 0
    assert r.stdout == (
        "Name      Version  Rev   Tracking     Publisher    Notes\n"
        "microk8s  v1.31.9  8148  1.31/stable  canonical**  classic\n"
    )

    r = node.snap("refresh", "microk8s", "--channel=1.32/stable")
    assert (r.returncode, r.stdout) == (0, "microk8s (1.32/stable) v1.32.9 from Canonical** refreshed\n")
    assert os.readlink(node.root / "var/snap/microk8s/current") == "8300"
    assert node.mk("version").stdout == "MicroK8s v1.32.9 revision 8300\n"
    assert agent_alive(node)
    r = node.snap("refresh", "microk8s", "--channel=1.32/stable")
    assert (r.returncode, r.stderr) == (0, 'snap "microk8s" has no updates available\n')

    r = node.snap("stop", "microk8s")
    assert (r.returncode, r.stdout) == (0, "Stopped.\n")
    assert not agent_alive(node)
    assert node.snap("start", "microk8s").stdout == "Started.\n"
    assert agent_alive(node)

    r = node.snap("remove", "microk8s")
    assert (r.returncode, r.stdout) == (0, "microk8s removed\n")
    assert not link.exists() and not (node.root / "var/snap/microk8s").exists()
    assert list(node.root.glob("var/snap/microk8s/*/var/run/*.pid")) == []
    r = node.snap("list", "microk8s")
    assert (r.returncode, r.stderr) == (1, "error: no matching snaps installed\n")

    r = node.snap("install", "microk8s", "--classic")
    assert r.stdout == "microk8s v1.34.1 from Canonical** installed\n"
    assert "latest/stable" in node.snap("list").stdout


# --------------------------------------------------------------------------- status


@pytest.mark.skipif(platform.machine() != "x86_64", reason="reference sample is the amd64 catalogue")
def test_status_fresh_node(make_node):
    node = make_node("node-a", 2)
    r = node.mk("status")
    assert (r.returncode, r.stdout, r.stderr) == (0, FRESH_PRETTY, "")

    r = node.mk("status", "--format", "yaml")
    assert r.returncode == 0
    assert r.stdout.startswith(FRESH_YAML_HEAD)
    assert r.stdout.count("  - name: ") == 24

    r = node.mk("status", "--format", "short")
    assert r.stdout.startswith("microk8s is running\naddons:\ncore/dns: enabled\ncore/ha-cluster: enabled\n")
    assert "core/cert-manager: disabled\n" in r.stdout
    r = node.mk("status", "--yaml")
    assert r.stdout.startswith("microk8s:\n  running: True\naddons:\n  core/dns: enabled\n  core/ha-cluster: enabled\n")

    assert node.mk("status", "-a", "dns").stdout == "enabled\n"
    assert node.mk("status", "--addon", "core/helm3").stdout == "enabled\n"
    assert node.mk("status", "-a", "hostpath-storage").stdout == "disabled\n"
    assert node.mk("status", "-a", "no-such-addon").stdout == "disabled\n"
    r = node.mk("status", "--wait-ready", "--timeout", "30")
    assert (r.returncode, r.stdout) == (0, FRESH_PRETTY)

    r = node.mk()
    assert r.returncode == 1 and r.stdout.startswith("Available subcommands are:\n\tadd-node\n")
    assert r.stdout.endswith("\tinspect\n")
    assert node.mk("help").returncode == 0
    r = node.mk("foo")
    assert r.returncode == 1 and r.stdout.startswith("'foo' is not a valid MicroK8s subcommand.\nAvailable subcommands are:\n")


def test_status_not_running_and_start_stop(make_node):
    node = make_node("node-a", 2)
    assert node.snap("stop", "microk8s").returncode == 0

    r = node.mk("status")
    assert (r.returncode, r.stdout) == (1, "microk8s is not running. Use microk8s inspect for a deeper inspection.\n")
    r = node.mk("status", "--format", "yaml")
    assert (r.returncode, r.stdout) == (1, NOT_RUNNING_YAML)
    r = node.mk("status", "--yaml")
    assert r.stdout == (
        "microk8s:\n  running: False\n"
        "  message: microk8s is not running. Use microk8s inspect for a deeper inspection.\n"
    )
    r = node.mk("status", "-a", "dns")
    assert (r.returncode, r.stdout) == (1, "disabled\n")
    t0 = time.time()
    r = node.mk("status", "--wait-ready", "--timeout", "1")
    assert r.returncode == 1 and time.time() - t0 >= 1
    r = node.mk("kubectl", "get", "nodes")
    assert r.returncode == 1 and "was refused" in r.stderr

    assert node.snap("start", "microk8s").returncode == 0
    r = node.mk("stop")
    assert (r.returncode, r.stdout) == (0, "Stopped.\n")
    assert node.data("var/lock/stopped.lock").exists()
    assert not agent_alive(node)
    r = node.mk("status")
    assert (r.returncode, r.stdout) == (0, "microk8s is not running, try microk8s start\n")
    r = node.mk("enable", "dns")
    assert (r.returncode, r.stderr) == (1, "microk8s is not running, try microk8s start\n")
    r = node.mk("add-node")
    assert (r.returncode, r.stderr) == (1, "microk8s is not running, try microk8s start\n")
    r = node.mk("kubectl", "get", "nodes")
    assert (r.returncode, r.stderr) == (1, "microk8s is not running, try microk8s start\n")

    r = node.mk("start")
    assert (r.returncode, r.stdout) == (0, "")
    assert not node.data("var/lock/stopped.lock").exists() and agent_alive(node)
    assert node.mk("status").stdout.startswith("microk8s is running\n")


# --------------------------------------------------------------------------- enable / disable


def test_enable_disable(make_node):
    node = make_node("node-a", 2)

    r = node.mk("enable", "dns")
    assert (r.returncode, r.stdout, r.stderr) == (
        0, "Addon core/dns is already enabled\n", "Infer repository core for addon dns\n"
    )
    r = node.mk("enable", "helm3")
    assert (r.returncode, r.stdout) == (0, "Addon core/helm3 is already enabled\n")
    r = node.mk("disable", "helm3")
    assert (r.returncode, r.stdout) == (0, "Helm comes pre-installed with MicroK8s\n")
    assert node.mk("status", "-a", "helm3").stdout == "enabled\n"

    r = node.mk("enable", "foo")
    assert (r.returncode, r.stdout, r.stderr) == (1, "", "Addon foo was not found in any repository\n")
    r = node.mk("enable", "argocd")
    assert r.returncode == 1
    assert r.stdout == (
        "To use the community maintained flavor enable the respective repository:\n\n"
        "    microk8s enable community\n\n"
    )
    r = node.mk("enable", "core/foo")
    assert (r.returncode, r.stdout, r.stderr) == (0, "Addon core/foo not found\n", "")
    r = node.mk("enable")
    assert r.returncode == 2 and "Error: Missing argument 'ADDONS...'." in r.stderr
    r = node.mk("enable", "hostpath-storage", "--", "--help")
    assert (r.returncode, r.stdout) == (
        0,
        "Addon hostpath-storage does not yet have a help message.\n"
        "For more information about it, visit https://microk8s.io/docs/addons\n",
    )
    r = node.mk("enable", "dns:1.1.1.1", "--foo")
    assert r.returncode == 1 and r.stdout.startswith("Can't pass string arguments and flag arguments simultaneously!\n")

    storage = node.root / "var/snap/microk8s/common/default-storage"
    hostpath_out = (
        "Enabling default storage class.\n"
        "WARNING: Hostpath storage is not suitable for production environments.\n"
        "         A hostpath volume can grow beyond the size limit set in the volume claim manifest.\n"
        "\n"
        "deployment.apps/hostpath-provisioner created\n"
        "storageclass.storage.k8s.io/microk8s-hostpath created\n"
        "serviceaccount/microk8s-hostpath created\n"
        "clusterrole.rbac.authorization.k8s.io/microk8s-hostpath created\n"
        "clusterrolebinding.rbac.authorization.k8s.io/microk8s-hostpath created\n"
        "Storage will be available soon.\n"
    )
    r = node.mk("enable", "dns", "hostpath-storage")
    assert r.returncode == 0
    assert r.stderr == "Infer repository core for addon dns\nInfer repository core for addon hostpath-storage\n"
    assert r.stdout == (
        "WARNING: Do not enable or disable multiple addons in one command.\n"
        "         This form of chained operations on addons will be DEPRECATED in the future.\n"
        "         Please, enable one addon at a time: 'microk8s enable <addon>'\n"
        "Addon core/dns is already enabled\n" + hostpath_out
    )
    assert storage.is_dir()
    assert node.mk("status", "-a", "hostpath-storage").stdout == "enabled\n"
    assert node.mk("status", "-a", "storage").stdout == "enabled\n"

    # The disable prompt gets no answer without stdin: provisioner gone, storage kept, exit 1.
    removed = (
        "Disabling default storage\n"
        'deployment.apps "hostpath-provisioner" deleted\n'
        'storageclass.storage.k8s.io "microk8s-hostpath" deleted\n'
        'serviceaccount "microk8s-hostpath" deleted\n'
        'clusterrole.rbac.authorization.k8s.io "microk8s-hostpath" deleted\n'
        'clusterrolebinding.rbac.authorization.k8s.io "microk8s-hostpath" deleted\n'
        "Storage removed\n"
    )
    r = node.mk("disable", "hostpath-storage")
    assert (r.returncode, r.stdout) == (1, removed)
    assert storage.is_dir()
    assert node.mk("status", "-a", "hostpath-storage").stdout == "disabled\n"
    r = node.mk("disable", "hostpath-storage")
    assert (r.returncode, r.stdout) == (0, "Addon core/hostpath-storage is already disabled\n")
    assert node.mk("enable", "hostpath-storage").stdout == hostpath_out
    r = node.mk("disable", "hostpath-storage:destroy-storage")
    assert (r.returncode, r.stdout) == (0, removed + "Storage space reclaimed\n")
    assert not storage.exists()
    assert node.mk("enable", "hostpath-storage").returncode == 0
    r = node.mk("disable", "hostpath-storage", input="y\n")
    assert (r.returncode, r.stdout) == (0, removed + "Storage space reclaimed\n")

    r = node.mk("disable", "ha-cluster")
    assert (r.returncode, r.stdout) == (
        2,
        "Disabling HA will reset your cluster in a clean state.\n"
        "Any running workloads will be stopped and any cluster configuration will be lost.\n"
        "As this is a single node cluster and this is a destructive operation,\n"
        "please use the '--force' flag.\n",
    )
    assert node.data("var/lock/ha-cluster").exists()

    r = node.mk("enable", "metallb")
    assert r.returncode == 1
    assert r.stdout.startswith("Enabling MetalLB\nYou have to input an IP Range value when asked")
    r = node.mk("enable", "metallb:10.64.140.43")
    assert (r.returncode, r.stdout) == (1, "Enabling MetalLB\nYour input value (10.64.140.43) is not a valid IP Range\n")
    r = node.mk("enable", "metallb:10.64.140.43-10.64.140.49")
    assert r.returncode == 0 and r.stdout.endswith("MetalLB is enabled\n")
    assert node.mk("status", "-a", "metallb").stdout == "enabled\n"
    r = node.mk("enable", "metallb", "10.64.140.43-10.64.140.49")
    assert r.stdout == "Addon core/metallb is already enabled\n"

    # registry first enables hostpath-storage (inferred, so on stderr)
    r = node.mk("enable", "registry")
    assert r.returncode == 0
    assert r.stderr == "Infer repository core for addon registry\nInfer repository core for addon hostpath-storage\n"
    assert r.stdout.startswith(hostpath_out + "The registry will be created with the size of 20Gi.\nDefault storage class will be used.\n")
    assert node.mk("status", "-a", "registry").stdout == "enabled\n"

    r = node.mk("enable", "prometheus")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[:4] == [
        "DEPRECATION WARNING: 'prometheus' is deprecated and will soon be removed. Please use 'observability' instead.",
        "Addon core/dns is already enabled",
        "Addon core/helm3 is already enabled",
        "Addon core/hostpath-storage is already enabled",
    ]
    assert lines[-1] == "Observability has been enabled (user/pass: admin/prom-operator)"
    assert node.mk("status", "-a", "observability").stdout == "enabled\n"
    assert node.mk("status", "-a", "prometheus").stdout == "disabled\n"

    r = node.mk("enable", "rbac")
    assert r.stdout.endswith("RBAC is enabled\n")
    assert "--authorization-mode=RBAC,Node" in node.data("args/kube-apiserver").read_text()
    assert node.mk("status", "-a", "rbac").stdout == "enabled\n"

    r = node.mk("enable", "dns:1.1.1.1")
    assert r.stdout == "Addon core/dns is already enabled\n"
    r = node.mk("disable", "dns")
    assert r.returncode == 0 and r.stdout.startswith("Disabling DNS\n") and r.stdout.endswith("DNS is disabled\n")
    r = node.mk("enable", "dns:1.1.1.1")
    assert "Will use  1.1.1.1 as upstream nameservers\n" in r.stdout
    assert "CoreDNS service deployed with IP address 10.152.183.10\n" in r.stdout

    r = node.mk("enable", "community")
    assert r.stdout == "Community repository is now enabled\n"
    status = node.mk("status").stdout
    assert "    argocd               # (community) Argo CD is a declarative continuous deployment for Kubernetes.\n" in status
    # repositories sort by name, so community addons precede the core ones
    assert status.index("(community) Argo CD") < status.index("(core) Apply CIS K8s hardening")


# --------------------------------------------------------------------------- add-node


def test_add_node_formats(make_node):
    node = make_node("node-a", 2)
    ip, token = node.ip, "3f9a0c1e2b7d4a5f8e6c9b0a1d2e3f40"
    check = cert_check(node)
    url = "{}:25000/{}/{}".format(ip, token, check)

    r = node.mk("add-node", "--token", token)
    assert r.returncode == 0
    assert r.stdout == (
        "From the node you wish to join to this cluster, run the following:\n"
        "microk8s join {u}\n\n"
        "Use the '--worker' flag to join a node as a worker not running the control plane, eg:\n"
        "microk8s join {u} --worker\n\n"
        "If the node you are adding is not reachable through the default interface you can use one of the following:\n"
        "microk8s join {u}\n"
    ).format(u=url)
    assert node.mk("add-node", "-t", token, "--format", "short").stdout == "microk8s join {}\n".format(url)
    assert node.mk("add-node", "-t", token, "--format", "token").stdout == token + "\n"
    assert node.mk("add-node", "-t", token, "--format", "token-check").stdout == "{}/{}\n".format(token, check)
    assert node.mk("add-node", "-t", token, "--format", "json").stdout == (
        '{{\n  "token": "{t}/{c}",\n  "urls": [\n    "{u}"\n  ]\n}}\n'.format(t=token, c=check, u=url)
    )
    assert node.mk("add-node", "-t", token, "--format", "yaml").stdout == (
        "token: {}/{}\nurls:\n- {}\n\n".format(token, check, url)
    )

    before = time.time()
    r = node.mk("add-node", "-l", "3600", "--format", "token")
    generated = r.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{32}", generated)
    lines = node.data("credentials/cluster-tokens.txt").read_text().splitlines()
    assert lines[:6] == [token] * 6
    ttl_token, expiry = lines[6].split("|")
    assert ttl_token == generated and before + 3600 - 2 <= int(expiry) <= time.time() + 3600 + 2

    r = node.mk("add-node", "--token", "short")
    assert (r.returncode, r.stdout) == (1, "Invalid token size.  It must be 32 characters long.\n")
    r = node.mk("add-node", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: microk8s add-node")

    # utils.sh cluster_agent_port only honours a line mentioning `port`
    with open(node.data("args/cluster-agent"), "a") as f:
        f.write("--port 26000\n")
    assert node.mk("add-node", "-t", token, "--format", "short").stdout == "microk8s join {}:26000/{}/{}\n".format(
        ip, token, check
    )


# --------------------------------------------------------------------------- join


def test_worker_and_control_plane_join(make_node):
    a, b, c = make_node("node-a", 2), make_node("node-b", 3), make_node("node-c", 4)
    write_hosts(a, b, c)
    for n in (a, b, c):
        n.set_bind()

    r = b.mk("join", a.join_string())
    assert (r.returncode, r.stdout, r.stderr) == (0, CP_JOIN.format(ip=a.ip), "")
    assert b.data("certs/ca.crt").read_text() == a.data("certs/ca.crt").read_text()
    for n in (a, b):
        assert n.data("var/lock/no-cert-reissue").exists()
        assert n.data("var/kubernetes/backend/cluster.yaml").read_text() == (
            "- Address: {a}:19001\n  ID: {ia}\n  Role: 0\n- Address: {b}:19001\n  ID: {ib}\n  Role: 2\n"
        ).format(a=a.ip, b=b.ip, **_ids(a))
    assert not b.data("var/lock/clustered.lock").exists()
    # in a 2-member cluster the second member is a spare and is not shown
    for n in (a, b):
        assert n.mk("status").stdout.startswith(
            "microk8s is running\nhigh-availability: no\n"
            "  datastore master nodes: {}:19001\n  datastore standby nodes: none\n".format(a.ip)
        )
    assert "      role: spare\n" in b.mk("status", "--format", "yaml").stdout
    # addons live in the shared datastore: enabling on node-b shows on node-a
    assert b.mk("enable", "metrics-server").returncode == 0
    assert a.mk("status", "-a", "metrics-server").stdout == "enabled\n"

    r = c.mk("join", a.join_string(), "--worker")
    assert (r.returncode, r.stdout) == (0, WORKER_JOIN.format(ip=a.ip))
    for lock in ("clustered.lock", "no-k8s-dqlite", "no-cert-reissue"):
        assert c.data("var/lock/" + lock).exists()
    assert c.data("certs/ca.remote.crt").read_text() == a.data("certs/ca.crt").read_text()
    r = c.mk("status")
    assert (r.returncode, r.stdout) == (
        0, "This MicroK8s deployment is acting as a node in a cluster.\nPlease use the control plane node.\n"
    )
    r = c.mk("add-node")
    assert (r.returncode, r.stdout) == (
        1, "This MicroK8s deployment is acting as a node in a cluster. Please use the microk8s add-node on the master.\n"
    )
    assert c.mk("kubectl", "get", "nodes").stdout.startswith("This MicroK8s deployment is acting as a node")
    assert c.mk("enable", "dns").returncode == 1
    assert c.mk("refresh-certs", "-c").returncode == 0

    # the node list lives on the control plane and reached node-b without node-b taking part
    doc = json.loads(b.mk("kubectl", "get", "nodes", "-o", "json").stdout)
    assert doc["kind"] == "List"
    items = {i["metadata"]["name"]: i for i in doc["items"]}
    assert set(items) == {"node-a", "node-b", "node-c"}
    assert items["node-c"]["metadata"]["labels"]["node.kubernetes.io/microk8s-worker"] == "microk8s-worker"
    assert items["node-b"]["metadata"]["labels"]["node.kubernetes.io/microk8s-controlplane"] == "microk8s-controlplane"
    assert items["node-c"]["status"]["addresses"][0] == {"address": c.ip, "type": "InternalIP"}
    table = a.mk("kubectl", "get", "nodes").stdout.splitlines()
    assert table[0] == "NAME     STATUS   ROLES    AGE   VERSION"
    assert re.fullmatch(r"node-c   Ready    <none>   \d+s +v1\.31\.9", table[3])

    # a third control-plane member forms the HA quorum, seen by every member
    d = make_node("node-d", 5)
    write_hosts(a, b, c, d)
    d.set_bind()
    r = d.mk("join", b.join_string(), env={"KOS_STANDIN_DELAY": "0.5"})
    assert r.stdout == (
        "Contacting cluster at {}\nWaiting for this node to finish joining the cluster. ..  \n"
        "Successfully joined the cluster.\n".format(b.ip)
    )
    for n in (a, b, d):
        assert n.mk("status").stdout.startswith(
            "microk8s is running\nhigh-availability: yes\n"
            "  datastore master nodes: {}:19001 {}:19001 {}:19001\n"
            "  datastore standby nodes: none\n".format(a.ip, b.ip, d.ip)
        )

    # rejoining a member that never left
    r = b.mk("join", a.join_string())
    assert (r.returncode, r.stdout.splitlines()[-1]) == (
        6,
        "Connection failed. Failed to retrieve dqlite cluster nodes: the joining node ({}) is already known to dqlite (500).".format(b.ip),
    )

    # remove-node (scripts/wrappers/remove_node.py)
    r = a.mk("remove-node", "node-b")
    assert (r.returncode, r.stdout) == (
        1,
        "Removal failed. Node node-b is registered with dqlite. Please, run first 'microk8s leave' on the departing node. \n"
        "If the node is not available anymore and will never attempt to join the cluster in the future use the '--force' flag \n"
        "to unregister the node while removing it.\n",
    )
    r = a.mk("remove-node", "nosuch")
    assert (r.returncode, r.stdout) == (1, "Node nosuch does not exist in Kubernetes.\n")
    assert r.stderr == 'Error from server (NotFound): nodes "nosuch" not found\n'
    r = a.mk("remove-node", "node-b", "now")
    assert (r.returncode, r.stdout) == (1, "Please provide the node and the optional --force flag.\n")
    r = a.mk("remove-node", c.ip)
    assert (r.returncode, r.stdout) == (0, "")
    assert "node-c" not in a.mk("kubectl", "get", "nodes").stdout

    # leave (scripts/wrappers/leave.py): departed member NotReady until remove-node
    r = b.mk("leave")
    assert (r.returncode, r.stdout) == (0, "Generating new cluster certificates.\nWaiting for node to start.  \n")
    assert not b.data("var/lock/no-cert-reissue").exists()
    assert b.mk("status").stdout.startswith("microk8s is running\nhigh-availability: no\n  datastore master nodes: 127.0.0.1:19001\n")
    assert re.search(r"^node-b +NotReady ", a.mk("kubectl", "get", "nodes").stdout, re.M)
    assert d.mk("status").stdout.startswith(
        "microk8s is running\nhigh-availability: no\n  datastore master nodes: {}:19001\n".format(a.ip)
    )
    r = b.mk("leave")
    assert (r.returncode, r.stdout) == (1, "This MicroK8s deployment is not acting as a node in a cluster.\n")
    # a: only voter of a 2-member cluster
    r = a.mk("leave")
    assert r.returncode == 3
    assert r.stdout.startswith("This node currently holds the only copy of the Kubernetes database so it cannot leave the cluster.\n")
    assert (a.mk("remove-node", "node-b").returncode, a.mk("kubectl", "get", "nodes").stdout.count("node-b")) == (0, 0)

    r = c.mk("leave")
    assert (r.returncode, r.stdout) == (
        0, "Configuring services.\nGenerating new cluster certificates.\nWaiting for node to start.  \n"
    )
    assert not c.data("var/lock/clustered.lock").exists()
    assert c.mk("status").stdout.startswith("microk8s is running\n")


def _ids(a):
    text = a.data("var/kubernetes/backend/cluster.yaml").read_text()
    ids = re.findall(r"ID: (\d+)", text)
    return {"ia": ids[0], "ib": ids[1]}


def api_get(node, path, sans=None):
    """GET path from the node's --secure-port, the server's name checked against the node's
    certificate as kubectl checks it (the cluster CA, the address dialled); the certificate's
    IP addresses go into ``sans``."""
    ctx = ssl.create_default_context(cafile=str(node.data("certs/ca.crt")))
    with socket.create_connection((node.ip, 16443), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=node.ip) as tls:
            if sans is not None:
                sans.extend(v for k, v in tls.getpeercert()["subjectAltName"] if k == "IP Address")
            tls.sendall("GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n".format(
                path, node.ip).encode())
            reply = b""
            while chunk := tls.recv(65536):
                reply += chunk
    head, _, body = reply.decode().partition("\r\n\r\n")
    return int(head.split()[1]), body


def test_a_control_plane_serves_the_apis_public_endpoints_and_a_worker_does_not(make_node):
    a, b = make_node("node-a", 2), make_node("node-b", 3)
    write_hosts(a, b)
    for n in (a, b):
        n.set_bind()
    for path in ("/livez", "/readyz", "/healthz"):
        assert api_get(a, path) == (200, "ok")
    status, body = api_get(a, "/version")
    assert status == 200 and json.loads(body) == {
        "major": "1", "minor": "31", "gitVersion": "v1.31.9", "platform": "linux/amd64"}
    status, body = api_get(a, "/api/v1/namespaces")
    assert status == 404 and json.loads(body)["kind"] == "Status"
    # a TCP health check (connect, reset) leaves no traceback, and the server goes on
    check = socket.create_connection((a.ip, 16443), timeout=10)
    check.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    check.close()
    assert api_get(a, "/livez") == (200, "ok")
    log = a.root / "var/snap/microk8s/common/var/log/kos-standin-cluster-agent.log"
    assert "Traceback" not in log.read_text()

    # refresh-certs with an address added to csr.conf.template: the new certificate is served
    template = a.data("certs/csr.conf.template")
    template.write_text(template.read_text().replace("#MOREIPS", "IP.9 = 192.0.2.9\n#MOREIPS"))
    assert a.mk("refresh-certs", "-e", "server.crt").returncode == 0
    sans = []
    assert api_get(a, "/readyz", sans) == (200, "ok") and "192.0.2.9" in sans, sans

    # a worker's port is its apiserver proxy, not run here; a stopped node serves nothing
    assert b.mk("join", a.join_string(), "--worker").returncode == 0
    with pytest.raises(ConnectionRefusedError):
        api_get(b, "/readyz")
    assert a.snap("stop", "microk8s").returncode == 0
    with pytest.raises(ConnectionRefusedError):
        api_get(a, "/readyz")
    assert a.snap("start", "microk8s").returncode == 0
    assert api_get(a, "/version")[0] == 200


def test_join_failures_and_token_semantics(make_node):
    a, b = make_node("node-a", 2), make_node("node-b", 3)
    a.set_bind()
    b.set_bind()

    # node-b is unknown to node-a's /etc/hosts: the single-use token is burned anyway
    token = a.join_string()
    r = b.mk("join", token)
    assert (r.returncode, r.stdout) == (
        6,
        "Contacting cluster at {a}\n"
        'Connection failed. The hostname (node-b) of the joining node does not resolve to the IP "{b}". '
        "Refusing join (400).\n".format(a=a.ip, b=b.ip),
    )
    assert a.data("credentials/cluster-tokens.txt").read_text() == ""
    write_hosts(a, b)
    r = b.mk("join", token)
    assert (r.returncode, r.stdout.splitlines()[-1]) == (6, "Connection failed. Invalid token (500).")

    # TTL tokens stay valid until they expire
    ttl = a.join_string("--token-ttl", "120")
    assert b.mk("join", ttl, "--worker").returncode == 0
    assert "|" in a.data("credentials/cluster-tokens.txt").read_text()
    assert b.mk("leave").returncode == 0
    r = b.mk("join", ttl, "--worker")
    assert (r.returncode, r.stdout) == (0, WORKER_JOIN.format(ip=a.ip))
    assert b.mk("leave").returncode == 0
    expired = "e" * 32
    with open(a.data("credentials/cluster-tokens.txt"), "a") as f:
        f.write("{}|{}\n".format(expired, int(time.time()) - 5))
    r = b.mk("join", "{}:25000/{}".format(a.ip, expired))
    assert r.stdout.splitlines()[-1] == "Connection failed. Invalid token (500)."
    (a.data("credentials/persistent-cluster-tokens.txt")).write_text("p" * 32 + "\n")
    r = b.mk("join", "{}:25000/{}".format(a.ip, "p" * 32), "--worker", "--skip-verify")
    assert r.returncode == 0
    assert b.mk("leave").returncode == 0

    # fingerprint mismatch (exit 4), unless --skip-verify
    wrong = "{}:25000/{}/{}".format(a.ip, "f" * 32, "0" * 12)
    r = b.mk("join", wrong)
    assert (r.returncode, r.stdout) == (
        4,
        "Contacting cluster at {0}\nJoining cluster failed. Could not verify the identity of {0}. "
        "Use '--skip-verify' to skip server certificate check.\n".format(a.ip),
    )
    r = b.mk("join", wrong, "--skip-verify")
    assert (r.returncode, r.stdout.splitlines()[-1]) == (6, "Connection failed. Invalid token (500)."), r.stderr

    # joining the node to itself
    r = a.mk("join", a.join_string())
    assert (r.returncode, r.stdout.splitlines()[-1]) == (
        6, "Connection failed. The joining node has the same IP ({}) as the node we contact (503).".format(a.ip)
    )

    # cluster-agent port mismatch
    conf = b.data("args/cluster-agent")
    conf.write_text(conf.read_text().replace(":25000", ":25001"))
    r = b.mk("join", a.join_string())
    assert r.stdout.splitlines()[-1] == "Connection failed. The port of the cluster agent port has to be set to 25000 (502)."
    conf.write_text(conf.read_text().replace(":25001", ":25000"))

    # target without the ha-cluster lock
    a.data("var/lock/ha-cluster").unlink()
    token = a.join_string()
    r = b.mk("join", token)
    assert r.stdout.splitlines()[-1] == "Connection failed. Not possible to join. This is not an HA MicroK8s cluster (501)."
    assert token.split("/")[1] not in a.data("credentials/cluster-tokens.txt").read_text()

    # hostpath warning, then validation (get_valid_connection_parts in
    # scripts/wrappers/common/cluster/utils.py) and a refused connection (traceback, exit 1)
    (b.root / "var/snap/microk8s/common/default-storage").mkdir()
    r = b.mk("join", "node-a:25000/" + "a" * 32)
    assert (r.returncode, r.stdout) == (
        1,
        "WARNING: Hostpath storage is enabled and is not suitable for multi node clusters.\n\n"
        "Invalid connection: Invalid master IP\n",
    )
    for conn, reason in (
        ("{}/{}".format(a.ip, "a" * 32), "Expected format: <master_IP>:<master_PORT>/<token>[/<fingerprint>]"),
        ("{}:x/{}".format(a.ip, "a" * 32), "Master PORT not a number"),
        ("{}:70000/{}".format(a.ip, "a" * 32), "Master PORT not in range 1:65535"),
        ("{}:25000/short".format(a.ip), "Cluster token size should be at least 32 bytes"),
        ("{}:25000/{}/abc".format(a.ip, "a" * 32), "Fingerprint should be at least 12 bytes"),
    ):
        r = b.mk("join", conn)
        assert (r.returncode, r.stdout.splitlines()[-1]) == (1, "Invalid connection: " + reason)
    closed = a.ip.rsplit(".", 1)[0] + ".250"
    r = b.mk("join", "{}:25000/{}".format(closed, "a" * 32))
    assert r.returncode == 1
    assert r.stdout.endswith("Contacting cluster at {}\n".format(closed))
    assert r.stderr.startswith("Traceback (most recent call last):\n")
    assert r.stderr.endswith("ConnectionRefusedError: [Errno 111] Connection refused\n")


# --------------------------------------------------------------------------- refresh-certs, config


def test_refresh_certs_and_config(make_node):
    node = make_node("node-a", 2)
    r = node.mk("refresh-certs")
    assert (r.returncode, r.stdout) == (
        3,
        "Please use the '--cert' flag to select the certificate you need refreshed.\n\n"
        "Available certificate options:\n"
        "'server.crt': refreshes the server certificate\n"
        "'front-proxy-client.crt': refreshes the front proxy client certificate\n"
        "'ca.crt': refreshes the root CA and all certificates created from it.\n"
        "            Warning: refreshing the root CA requires nodes to leave and re-join the cluster\n",
    )
    r = node.mk("refresh-certs", "-c")
    assert r.returncode == 0
    assert re.fullmatch(
        r"The CA certificate will expire in 36(49|50) days\.\n"
        r"The server certificate will expire in 36[45] days\.\n"
        r"The front proxy client certificate will expire in 36[45] days\.\n",
        r.stdout,
    )
    r = node.mk("refresh-certs", "-c", "-e", "server.crt")
    assert (r.returncode, r.stdout) == (2, "Please select only one of the options -c, -u or -e.\n")
    r = node.mk("refresh-certs", "-e", "server.crt", "/tmp")
    assert (r.returncode, r.stdout) == (1, "Please do not set any options in combination with the CA_DIR.\n")
    r = node.mk("refresh-certs", "-u")
    assert (r.returncode, r.stdout) == (1, "No previous backup found\n")
    if os.geteuid() == 0:
        # the node root under tmp_path is private to root, so run the app file itself
        r = node.run(str(STANDINS / "snap-apps" / "microk8s"), "refresh-certs", "-c", preexec_fn=_drop_to_nobody)
        assert (r.returncode, r.stdout) == (
            50, "Elevated permissions is needed for this operation. Please run this command with sudo.\n"
        )

    template = node.data("certs/csr.conf.template")
    template.write_text(template.read_text().replace("#MOREIPS", "IP.99 = 203.0.113.10\n#MOREIPS"))
    old_check = cert_check(node)
    r = node.mk("refresh-certs", "-e", "server.crt")
    assert r.returncode == 0
    assert r.stdout == (
        "Taking a backup of the current certificates under {}/\n"
        "Creating new certificates\n"
        "Restarting service kubelite.\n"
        "Restarting service cluster-agent.\n"
    ).format(node.root / "var/snap/microk8s/8148/certs-backup")
    sans = subprocess.run(
        ["openssl", "x509", "-in", str(node.data("certs/server.crt")), "-noout", "-ext", "subjectAltName"],
        capture_output=True, text=True, check=True,
    ).stdout
    assert "IP Address:203.0.113.10" in sans and "IP Address:{}".format(node.ip) in sans
    conf = node.data("certs/csr.conf").read_text()
    assert "IP.99 = 203.0.113.10\nIP.3 = {}\n".format(node.ip) in conf and "#MOREIPS" not in conf
    new_check = cert_check(node)
    assert new_check != old_check
    assert node.mk("add-node", "--format", "token-check").stdout.strip().endswith("/" + new_check)
    # the restarted agent serves the new certificate: a verified join gets past the fingerprint check
    peer = make_node("node-b", 3)
    write_hosts(node, peer)
    r = peer.mk("join", node.join_string())
    assert r.returncode == 0, r.stdout

    # config (microk8s-resources/wrappers/microk8s-config.wrapper)
    cfg = node.data("credentials/client.config").read_text()
    r = node.mk("config")
    assert r.stdout == cfg.replace("https://127.0.0.1:16443", "https://{}:16443".format(node.ip)) + "\n"
    assert node.mk("config", "-l").stdout == cfg + "\n"
    r = node.mk("config", "--bogus")
    assert (r.returncode, r.stdout) == (1, "microk8s config: invalid option -- --bogus\n")


def _drop_to_nobody():
    os.setgid(65534)
    os.setuid(65534)


# --------------------------------------------------------------------------- day 2: holds, cordon/drain, upgrades
# Holds: https://snapcraft.io/docs/managing-updates; cordon/uncordon/drain:
# https://kubernetes.io/docs/reference/kubectl/generated/kubectl_drain/; upgrades:
# https://discuss.kubernetes.io/t/upgrading-a-microk8s-cluster/18239

HELD_LIST = (
    "Name      Version  Rev   Tracking     Publisher    Notes\n"
    "microk8s  {}  {}  {}/stable  canonical**  {}\n"
)


def _record(node):
    return json.loads((node.root / "var/lib/snapd/kos-standin/microk8s.json").read_text())


def _held_until(text, prefix):
    m = re.fullmatch(re.escape(prefix) + r" held until (\S+)\n", text)
    assert m, text
    return m.group(1)


def test_snap_refresh_hold_and_unhold(make_node):
    node = make_node("node-a", 2, install=False)
    # snapd's daemon refuses to hold what is not installed
    for flag in ("--hold", "--unhold"):
        r = node.snap("refresh", flag, "microk8s")
        assert (r.returncode, r.stdout, r.stderr) == (1, "", 'error: snap "microk8s" is not installed\n')
    assert node.snap("install", "microk8s", "--classic", "--channel=1.31/stable").returncode == 0

    r = node.snap("refresh", "--hold", "microk8s")
    assert (r.returncode, r.stdout, r.stderr) == (0, 'General refreshes of "microk8s" held indefinitely\n', "")
    assert _record(node)["hold"] == "forever"
    r = node.snap("refresh", "--hold", "microk8s")  # idempotent
    assert (r.returncode, r.stdout) == (0, 'General refreshes of "microk8s" held indefinitely\n')
    for args in (("list",), ("list", "microk8s")):
        r = node.snap(*args)
        assert (r.returncode, r.stdout) == (0, HELD_LIST.format("v1.31.9", "8148", "1.31", "classic,held"))

    # --hold=DURATION: RFC 3339 of now+duration in the local zone (Go: Z for a zero offset)
    before = time.time()
    r = node.snap("refresh", "--hold=24h", "microk8s", env={"TZ": "UTC"})
    until = _held_until(r.stdout, 'General refreshes of "microk8s"')
    assert r.returncode == 0 and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", until)
    expiry = datetime.datetime.strptime(until, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()
    assert before + 86400 - 2 <= expiry <= time.time() + 86400 + 1
    assert _record(node)["hold"] == until
    r = node.snap("refresh", "--hold=1h30m", "microk8s", env={"TZ": "CET-1"})
    assert _held_until(r.stdout, 'General refreshes of "microk8s"').endswith("+01:00")
    assert node.snap("list", "microk8s").stdout.endswith("  classic,held\n")

    # bad values (Go time.ParseDuration messages after snapd's prefix)
    prefix = 'error: hold value must be a number of hours, minutes or seconds, or "forever": '
    for value, message in (
        ("1d", 'time: unknown unit "d" in duration "1d"'),
        ("abc", 'time: invalid duration "abc"'),
        ("5", 'time: missing unit in duration "5"'),
    ):
        r = node.snap("refresh", "--hold=" + value, "microk8s")
        assert (r.returncode, r.stdout, r.stderr) == (1, "", prefix + message + "\n")
    for value in ("0s", "500ms", "-1h"):
        r = node.snap("refresh", "--hold=" + value, "microk8s")
        assert (r.returncode, r.stderr) == (
            1, "error: cannot hold refreshes for less than a second: {}\n".format(value)
        )
    # --hold takes its value only as --hold=V: a separate word is a snap name
    r = node.snap("refresh", "--hold", "24h", "microk8s")
    assert (r.returncode, r.stderr) == (1, 'error: snap "24h" is not installed\n')
    r = node.snap("refresh", "--hold", "microk8s", "lxd")
    assert (r.returncode, r.stderr) == (1, 'error: snap "lxd" is not installed\n')
    # --hold/--unhold with other flags
    for args in (
        ("--hold", "--channel=1.32/stable", "microk8s"),
        ("--hold=24h", "--revision=8300", "microk8s"),
        ("--hold", "--unhold", "microk8s"),
        ("--hold", "--edge"),
    ):
        r = node.snap("refresh", *args)
        assert (r.returncode, r.stdout, r.stderr) == (1, "", "error: cannot use --hold with other flags\n"), args
    r = node.snap("refresh", "--unhold", "--channel=1.32/stable", "microk8s")
    assert (r.returncode, r.stderr) == (1, "error: cannot use --unhold with other flags\n")
    assert node.mk("version").stdout == "MicroK8s v1.31.9 revision 8148\n"  # nothing was refreshed

    # an explicit refresh still refreshes a held snap and keeps it held
    assert node.snap("refresh", "--hold", "microk8s").returncode == 0
    r = node.snap("refresh", "microk8s", "--channel=1.32/stable")
    assert (r.returncode, r.stdout) == (0, "microk8s (1.32/stable) v1.32.9 from Canonical** refreshed\n")
    assert node.snap("list").stdout == HELD_LIST.format("v1.32.9", "8300", "1.32", "classic,held")
    assert _record(node)["hold"] == "forever"

    # an expired hold no longer counts
    rec = _record(node)
    rec["hold"] = "2020-01-01T00:00:00Z"
    (node.root / "var/lib/snapd/kos-standin/microk8s.json").write_text(json.dumps(rec))
    assert node.snap("list").stdout == HELD_LIST.format("v1.32.9", "8300", "1.32", "classic")

    r = node.snap("refresh", "--unhold", "microk8s")
    assert (r.returncode, r.stdout, r.stderr) == (0, 'Removed general refresh hold of "microk8s"\n', "")
    assert "hold" not in _record(node)
    assert node.snap("list").stdout == HELD_LIST.format("v1.32.9", "8300", "1.32", "classic")

    # no snap names: the system-wide auto-refresh hold (not a Notes entry)
    system = node.root / "var/lib/snapd/kos-standin/system.json"
    r = node.snap("refresh", "--hold")
    assert (r.returncode, r.stdout, r.stderr) == (0, "Auto-refresh of all snaps held indefinitely\n", "")
    assert json.loads(system.read_text()) == {"refresh.hold": "forever"}
    r = node.snap("refresh", "--hold=72h", env={"TZ": "UTC"})
    assert json.loads(system.read_text()) == {"refresh.hold": _held_until(r.stdout, "Auto-refresh of all snaps")}
    assert node.snap("list").stdout.endswith("  classic\n")
    r = node.snap("refresh", "--unhold")
    assert (r.returncode, r.stdout) == (0, "Removed auto-refresh hold on all snaps\n")
    assert json.loads(system.read_text()) == {}
    r = node.snap("refresh")
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "All snaps up to date.\n")


def _node_items(node):
    r = node.mk("kubectl", "get", "nodes", "-o", "json")
    assert r.returncode == 0, r.stderr
    return {i["metadata"]["name"]: i for i in json.loads(r.stdout)["items"]}


def _node_rows(node):
    """NAME -> (STATUS, VERSION) of `kubectl get nodes`."""
    lines = node.mk("kubectl", "get", "nodes").stdout.splitlines()
    assert lines[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    return {cols[0]: (cols[1], cols[4]) for cols in (line.split() for line in lines[1:])}


def _assert_cordoned(item):
    spec = item["spec"]
    assert set(spec) == {"taints", "unschedulable"} and spec["unschedulable"] is True
    (taint,) = spec["taints"]
    assert (taint["effect"], taint["key"]) == ("NoSchedule", "node.kubernetes.io/unschedulable")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", taint["timeAdded"])
    return taint["timeAdded"]


def test_kubectl_cordon_uncordon_drain(make_node):
    node = make_node("node-a", 2)
    kubectl = lambda *a: node.mk("kubectl", *a)  # noqa: E731

    r = kubectl("cordon", "node-a")
    assert (r.returncode, r.stdout, r.stderr) == (0, "node/node-a cordoned\n", "")
    r = kubectl("cordon", "node-a")
    assert (r.returncode, r.stdout, r.stderr) == (0, "node/node-a already cordoned\n", "")
    assert _node_rows(node) == {"node-a": ("Ready,SchedulingDisabled", "v1.31.9")}
    table = kubectl("get", "nodes").stdout.splitlines()
    assert table[0] == "NAME     STATUS                     ROLES    AGE   VERSION"
    assert re.fullmatch(r"node-a   Ready,SchedulingDisabled   <none>   \d+s +v1\.31\.9", table[1])
    _assert_cordoned(_node_items(node)["node-a"])
    assert json.loads(kubectl("get", "node", "node-a", "-o", "json").stdout)["spec"]["unschedulable"] is True

    r = kubectl("uncordon", "node-a")
    assert (r.returncode, r.stdout, r.stderr) == (0, "node/node-a uncordoned\n", "")
    r = kubectl("uncordon", "node-a")
    assert (r.returncode, r.stdout, r.stderr) == (0, "node/node-a already uncordoned\n", "")
    assert _node_items(node)["node-a"]["spec"] == {}
    assert _node_rows(node) == {"node-a": ("Ready", "v1.31.9")}

    # drain = cordon + evictions (none: the stand-in datastore has no Pods) + drained
    r = kubectl("drain", "node-a", "--dry-run=client")
    assert (r.returncode, r.stdout) == (0, "node/node-a cordoned (dry run)\nnode/node-a drained (dry run)\n")
    assert _node_items(node)["node-a"]["spec"] == {}
    r = kubectl(
        "drain", "node-a", "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=300s",
        "--grace-period", "30",
    )
    assert (r.returncode, r.stdout, r.stderr) == (0, "node/node-a cordoned\nnode/node-a drained\n", "")
    added = _assert_cordoned(_node_items(node)["node-a"])
    r = kubectl("drain", "node-a", "--ignore-daemonsets", "--delete-emptydir-data")  # idempotent
    assert (r.returncode, r.stdout, r.stderr) == (0, "node/node-a already cordoned\nnode/node-a drained\n", "")
    assert _assert_cordoned(_node_items(node)["node-a"]) == added

    # errors (kubectl's usage and pflag errors): stderr, exit 1, nothing changed
    usage = "error: USAGE: {0} NODE [flags]\nSee 'kubectl {0} -h' for help and examples\n"
    for verb in ("drain", "cordon", "uncordon"):
        r = kubectl(verb)
        assert (r.returncode, r.stdout, r.stderr) == (1, "", usage.format(verb))
        r = kubectl(verb, "nosuch")
        assert (r.returncode, r.stdout, r.stderr) == (1, "", 'Error from server (NotFound): nodes "nosuch" not found\n')
    r = kubectl("uncordon", "node-a", "nosuch")
    assert (r.returncode, r.stdout) == (1, "")
    _assert_cordoned(_node_items(node)["node-a"])
    for args, message in (
        (("--bogus",), "unknown flag: --bogus"),
        (("--timeout=5",), 'invalid argument "5" for "--timeout" flag: time: missing unit in duration "5"'),
        (
            ("--grace-period=soon",),
            'invalid argument "soon" for "--grace-period" flag: strconv.ParseInt: parsing "soon": invalid syntax',
        ),
        (
            ("--force=maybe",),
            'invalid argument "maybe" for "--force" flag: strconv.ParseBool: parsing "maybe": invalid syntax',
        ),
        (("--timeout",), "flag needs an argument: --timeout"),
    ):
        r = kubectl("drain", "node-a", *args)
        assert (r.returncode, r.stdout, r.stderr) == (
            1, "", "error: {}\nSee 'kubectl drain --help' for usage.\n".format(message)
        ), args
    r = kubectl("uncordon", "node-a", "--ignore-daemonsets")
    assert r.stderr == "error: unknown flag: --ignore-daemonsets\nSee 'kubectl uncordon --help' for usage.\n"
    assert kubectl("uncordon", "node/node-a").stdout == "node/node-a uncordoned\n"

    # stopped services: kubectl cannot reach the API server
    assert node.snap("stop", "microk8s").returncode == 0
    r = kubectl("cordon", "node-a")
    assert (r.returncode, r.stderr) == (
        1, "The connection to the server 127.0.0.1:16443 was refused - did you specify the right host or port?\n"
    )


def _datastore_node(node, name):
    ds = json.loads(node.data("var/kubernetes/backend/kos-standin-datastore.json").read_text())
    return next(n for n in ds["nodes"] if n["name"] == name)


def test_refresh_of_a_stopped_node_reports_its_version_when_started(make_node):
    node = make_node("node-a", 2)
    assert node.mk("kubectl", "cordon", "node-a").returncode == 0
    assert node.snap("stop", "microk8s").returncode == 0
    r = node.snap("refresh", "microk8s", "--channel=1.32/stable")
    assert (r.returncode, r.stdout) == (0, "microk8s (1.32/stable) v1.32.9 from Canonical** refreshed\n")
    assert not agent_alive(node)
    assert _datastore_node(node, "node-a")["version"] == "v1.31.9"  # its kubelet has not run yet
    assert node.snap("start", "microk8s").stdout == "Started.\n"
    assert _node_rows(node) == {"node-a": ("Ready,SchedulingDisabled", "v1.32.9")}
    item = _node_items(node)["node-a"]
    assert (item["status"]["nodeInfo"]["kubeletVersion"], item["status"]["nodeInfo"]["kubeProxyVersion"]) == (
        "v1.32.9", "v1.32.9"
    )


def test_rolling_upgrade_of_a_control_plane_and_a_worker(make_node):
    """The per-node loop of https://discuss.kubernetes.io/t/upgrading-a-microk8s-cluster/18239
    (control plane first, then the worker; drain and uncordon issued on the control plane), with
    the snap held throughout."""
    cp, worker = make_node("node-a", 2), make_node("node-c", 4)
    write_hosts(cp, worker)
    for n in (cp, worker):
        n.set_bind()
    r = worker.mk("join", cp.join_string(), "--worker")
    assert (r.returncode, r.stdout) == (0, WORKER_JOIN.format(ip=cp.ip))
    for n in (cp, worker):
        assert n.snap("refresh", "--hold", "microk8s").stdout == 'General refreshes of "microk8s" held indefinitely\n'
    assert _node_rows(cp) == {"node-a": ("Ready", "v1.31.9"), "node-c": ("Ready", "v1.31.9")}

    # the control plane
    r = cp.mk("kubectl", "drain", "node-a", "--ignore-daemonsets", "--delete-emptydir-data")
    assert (r.returncode, r.stdout) == (0, "node/node-a cordoned\nnode/node-a drained\n")
    r = cp.snap("refresh", "microk8s", "--channel=1.32/stable")
    assert (r.returncode, r.stdout) == (0, "microk8s (1.32/stable) v1.32.9 from Canonical** refreshed\n")
    items = _node_items(cp)
    assert items["node-a"]["status"]["nodeInfo"]["kubeletVersion"] == "v1.32.9"
    assert items["node-a"]["status"]["conditions"][0]["status"] == "True"
    _assert_cordoned(items["node-a"])
    assert items["node-c"]["status"]["nodeInfo"]["kubeletVersion"] == "v1.31.9"
    assert cp.mk("kubectl", "uncordon", "node-a").stdout == "node/node-a uncordoned\n"
    assert _node_rows(cp) == {"node-a": ("Ready", "v1.32.9"), "node-c": ("Ready", "v1.31.9")}

    # the worker: drained from the control plane (kubectl on a worker only prints
    # microk8s-kubectl.wrapper's message)
    r = worker.mk("kubectl", "drain", "node-c", "--ignore-daemonsets", "--delete-emptydir-data")
    assert (r.returncode, r.stdout) == (
        0, "This MicroK8s deployment is acting as a node in a cluster. Please use the microk8s kubectl on the master.\n"
    )
    r = cp.mk("kubectl", "drain", "node-c", "--ignore-daemonsets", "--delete-emptydir-data")
    assert (r.returncode, r.stdout, r.stderr) == (0, "node/node-c cordoned\nnode/node-c drained\n", "")
    assert _node_rows(cp)["node-c"] == ("Ready,SchedulingDisabled", "v1.31.9")
    added = _assert_cordoned(_node_items(cp)["node-c"])

    r = worker.snap("refresh", "microk8s", "--channel=1.32/stable")
    assert (r.returncode, r.stdout, r.stderr) == (0, "microk8s (1.32/stable) v1.32.9 from Canonical** refreshed\n", "")
    assert worker.mk("version").stdout == "MicroK8s v1.32.9 revision 8300\n"
    assert worker.snap("list").stdout == HELD_LIST.format("v1.32.9", "8300", "1.32", "classic,held")
    assert agent_alive(worker)

    # the control plane sees the worker back, on the new version, still cordoned
    item = _node_items(cp)["node-c"]
    info = item["status"]["nodeInfo"]
    assert (info["kubeletVersion"], info["kubeProxyVersion"]) == ("v1.32.9", "v1.32.9")
    assert item["status"]["conditions"][0]["status"] == "True"
    assert _assert_cordoned(item) == added
    assert _node_rows(cp) == {"node-a": ("Ready", "v1.32.9"), "node-c": ("Ready,SchedulingDisabled", "v1.32.9")}

    r = cp.mk("kubectl", "uncordon", "node-c")
    assert (r.returncode, r.stdout, r.stderr) == (0, "node/node-c uncordoned\n", "")
    assert _node_items(cp)["node-c"]["spec"] == {}
    assert _node_rows(cp) == {"node-a": ("Ready", "v1.32.9"), "node-c": ("Ready", "v1.32.9")}
    r = cp.mk("kubectl", "uncordon", "node-c")
    assert (r.returncode, r.stdout) == (0, "node/node-c already uncordoned\n")

    # a worker that leaves turns NotReady on the control plane; cordoned: both in STATUS
    assert worker.mk("leave").returncode == 0
    assert cp.mk("kubectl", "cordon", "node-c").stdout == "node/node-c cordoned\n"
    assert _node_rows(cp)["node-c"] == ("NotReady,SchedulingDisabled", "v1.32.9")


# --------------------------------------------------------------------------- dbctl
# https://microk8s.io/docs/backup-restore

DBCTL_HELP_HEAD = (
    "usage: microk8s dbctl [-h] [--debug] {restore,backup} ...\n\nbackup and restore the Kubernetes datastore.\n"
)
DBCTL_NOT_RUNNING = (10, "Please ensure the kubernetes apiserver is running and HA is enabled.\n")


def _archive_members(path):
    with tarfile.open(str(path), "r:gz") as tar:
        return sorted(tar.getnames())


def test_dbctl_guards_names_and_failures(make_node, tmp_path):
    node = make_node("node-a", 2)
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    dbctl = lambda *a: node.mk("dbctl", *a, cwd=str(work))  # noqa: E731

    r = dbctl()
    assert (r.returncode, r.stderr) == (0, "")
    assert r.stdout.startswith(DBCTL_HELP_HEAD)
    assert "{restore,backup}  backup and restore operations\n" in r.stdout

    # default name: backup-YYYY-MM-DD-HH-MM-SS.tar.gz in the current directory
    r = dbctl("backup")
    assert (r.returncode, r.stderr) == (0, "")
    m = re.fullmatch(
        r"Backing up the datastore\nThe backup is: (backup-\d{4}-\d\d-\d\d-\d\d-\d\d-\d\d)\.tar\.gz\n", r.stdout
    )
    assert m, r.stdout
    name = m.group(1)
    stamp = datetime.datetime.strptime(name, "backup-%Y-%m-%d-%H-%M-%S")
    assert abs((datetime.datetime.now() - stamp).total_seconds()) < 60  # local time
    archive = work / (name + ".tar.gz")
    members = _archive_members(archive)
    assert members[0] == name and all(m == name or m.startswith(name + "/") for m in members)
    assert name + "/registry/minions/node-a.json" in members
    assert archive.stat().st_size > 512

    # -o: a trailing .tar.gz is not doubled, a path is allowed, the directory inside is the base name
    for arg, shown, rel in (
        ("snap.tar.gz", "snap.tar.gz", "snap.tar.gz"),
        ("plain", "plain.tar.gz", "plain.tar.gz"),
        ("sub/nested", "sub/nested.tar.gz", "sub/nested.tar.gz"),
        (str(tmp_path / "abs.tar.gz"), str(tmp_path / "abs.tar.gz"), str(tmp_path / "abs.tar.gz")),
    ):
        r = dbctl("backup", "-o", arg)
        assert (r.returncode, r.stdout) == (0, "Backing up the datastore\nThe backup is: {}\n".format(shown)), arg
        path = work / rel
        assert path.is_file(), arg
        base = os.path.basename(rel)[: -len(".tar.gz")]
        assert _archive_members(path)[0] == base
    assert not (work / "snap.tar.gz.tar.gz").exists()

    # --debug is a top-level option: before the sub-command only
    r = dbctl("--debug", "backup", "-o", "dbg")
    assert (r.returncode, r.stdout) == (0, "Backing up the datastore\nThe backup is: dbg.tar.gz\n")
    r = dbctl("backup", "--debug")
    assert r.returncode == 2 and r.stderr.endswith("microk8s dbctl: error: unrecognized arguments: --debug\n")

    # restore, and its failures
    r = dbctl("restore", "plain.tar.gz")
    assert (r.returncode, r.stdout, r.stderr) == (0, "Restoring from plain.tar.gz\n", "")
    r = dbctl("restore", "nope.tar.gz")
    assert (r.returncode, r.stdout) == (1, "Restoring from nope.tar.gz\n")
    assert r.stderr.startswith("Traceback (most recent call last):\n")
    assert r.stderr.endswith("FileNotFoundError: [Errno 2] No such file or directory: 'nope.tar.gz'\n")
    (work / "junk.tar.gz").write_text("not an archive\n")
    r = dbctl("restore", "junk.tar.gz")
    assert (r.returncode, r.stdout) == (1, "Restoring from junk.tar.gz\n")
    assert r.stderr.startswith("Traceback (most recent call last):\n") and "tarfile.ReadError" in r.stderr
    os.rename(str(work / "plain.tar.gz"), str(work / "renamed.tar.gz"))  # its directory is still "plain"
    r = dbctl("restore", "renamed.tar.gz")
    assert (r.returncode, r.stdout) == (3, "Restoring from renamed.tar.gz\nRestore process failed. 1\n")
    r = dbctl("backup", "-o", "missing-dir/x")
    assert (r.returncode, r.stdout) == (1, "Backing up the datastore\n")
    assert r.stderr.endswith("FileNotFoundError: [Errno 2] No such file or directory: 'missing-dir/x.tar.gz'\n")

    # apiserver not running (microk8s stop, snap stop) or HA disabled: exit 10, before argparse
    assert node.mk("stop").returncode == 0
    for args in (("backup",), ("restore", "snap.tar.gz"), ()):
        r = dbctl(*args)
        assert (r.returncode, r.stdout) == DBCTL_NOT_RUNNING, args
    assert node.mk("start").returncode == 0
    assert node.snap("stop", "microk8s").returncode == 0
    r = dbctl("backup")
    assert (r.returncode, r.stdout) == DBCTL_NOT_RUNNING
    assert node.snap("start", "microk8s").returncode == 0
    assert node.mk("disable", "ha-cluster", "--force").returncode == 0
    r = dbctl("backup", "-o", "no-ha")
    assert (r.returncode, r.stdout) == DBCTL_NOT_RUNNING
    assert not (work / "no-ha.tar.gz").exists()
    assert node.mk("enable", "ha-cluster").returncode == 0
    assert dbctl("backup", "-o", "ha-again").returncode == 0


def _get_all(node):
    r = node.mk("kubectl", "get", "all", "-A")
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_dbctl_backup_restore_across_control_planes(make_node, tmp_path):
    a, b, c = make_node("node-a", 2), make_node("node-b", 3), make_node("node-c", 4)
    write_hosts(a, b, c)
    for n in (a, b, c):
        n.set_bind()
    assert b.mk("join", a.join_string()).returncode == 0
    assert c.mk("join", a.join_string(), "--worker").returncode == 0
    # the cluster CA key: a joined control plane holds the first node's; a worker keeps the one
    # its own install generated (it only receives ca.remote.crt)
    assert b.data("certs/ca.key").read_text() == a.data("certs/ca.key").read_text()
    assert c.data("certs/ca.key").is_file()
    assert c.data("certs/ca.key").read_text() != a.data("certs/ca.key").read_text()

    # a worker refuses
    r = c.mk("dbctl", "backup", cwd=str(tmp_path))
    assert (r.returncode, r.stdout) == (
        1, "This MicroK8s deployment is acting as a node in a cluster.\nPlease use the master node.\n"
    )

    before_all, before_nodes = _get_all(a), set(_node_rows(a))
    assert before_nodes == {"node-a", "node-b", "node-c"}
    assert "deployment.apps/coredns" in before_all and "metrics-server" not in before_all
    archive = tmp_path / "cluster.tar.gz"
    r = a.mk("dbctl", "backup", "-o", str(archive))
    assert (r.returncode, r.stdout) == (0, "Backing up the datastore\nThe backup is: {}\n".format(archive))
    assert {"cluster/registry/minions/{}.json".format(n) for n in before_nodes} <= set(_archive_members(archive))

    # after the backup: an object made, objects deleted
    assert b.mk("enable", "metrics-server").returncode == 0
    assert a.mk("disable", "dns").returncode == 0
    assert a.mk("kubectl", "delete", "node", "node-c").returncode == 0
    for n in (a, b):
        assert "metrics-server" in _get_all(n) and "coredns" not in _get_all(n)
        assert set(_node_rows(n)) == {"node-a", "node-b"}

    # restored once, on the other control-plane member: every member serves the backup's objects
    r = b.mk("dbctl", "restore", str(archive))
    assert (r.returncode, r.stdout, r.stderr) == (0, "Restoring from {}\n".format(archive), "")
    for n in (a, b):
        assert _get_all(n) == before_all
        assert set(_node_rows(n)) == before_nodes
        assert n.mk("status", "-a", "metrics-server").stdout == "disabled\n"
        assert n.mk("status", "-a", "dns").stdout == "enabled\n"
    # objects only: dqlite membership stays as it is
    assert a.data("var/kubernetes/backend/cluster.yaml").read_text() == b.data(
        "var/kubernetes/backend/cluster.yaml"
    ).read_text()
    assert a.mk("status").stdout.startswith("microk8s is running\n")
