"""
End to end on the local rehearsal cloud: ``kos up --cloud local`` builds the OpenStack plan
as systemd-nspawn hosts on this machine and converges it over SSH through the bastion,
exactly as on OpenStack; ``kos down`` removes it. One cluster per distribution, each with
its own name and networks, so their namespaces (``kos-<cluster>-*``) never meet.
"""

import json
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kos.local import hosts as local_hosts
from kos.local import net as local_net
from tests.bootstrap.conftest import Kos, base_env, ssh_agent  # noqa: F401 - the fixture
from tests.netlab import can_use_netns

pytestmark = pytest.mark.skipif(not can_use_netns(), reason="needs root for namespaces")

CLUSTERS = {
    "microk8s": {
        "cluster_name": "kose2em",
        "kubernetes_distribution": "microk8s",
        "num_control_plane": 1,
        "num_kube_nodes": 3,
        "public_cidr": "10.246.0.0/24",
        "private_cidr": "10.247.0.0/24",
    },
    "kubeadm": {
        "cluster_name": "kose2ek",
        "kubernetes_distribution": "kubeadm",
        "num_control_plane": 3,
        "num_kube_nodes": 4,
        "public_cidr": "10.248.0.0/24",
        "private_cidr": "10.249.0.0/24",
    },
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

    def outputs(self):
        return json.loads((self.state / "local" / "outputs.json").read_text())

    def host(self, hostname):
        spec = next(h for h in _specs(self.values) if h.hostname == hostname)
        return local_hosts.Host(self.name, spec, self.values["deploy_domain_name"], self.state / "local" / "hosts")

    def netns(self, hostname):
        return local_net.host_ns(self.name, hostname)

    def hostnames(self):
        return [h.hostname for h in _specs(self.values)]


def _specs(values):
    from kos.local import plan

    return plan.hosts({**DEFAULTS, **values})


DEFAULTS = {
    "deploy_domain_name": "kos.internal",
    "first_control_plane_access": "floating_ip",
    "availability_zones": [],
}


def leftovers(cluster_name, state):
    """What of a local cluster still exists on this machine, by the names kos gives."""
    found = []
    found += [f"netns {n}" for n in local_net.namespaces(f"kos-{cluster_name}-")]
    found += [f"link {n}" for n in local_net.links(local_net.uplink(cluster_name))]
    found += [f"nspawn {n}" for n in local_hosts.nspawns(rf"kos-{cluster_name}-.*")]
    root = str(state)
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        if point.startswith(root):
            found.append(f"mount {point}")
    # a host's processes outlive nspawn only as orphans of their systemd
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(state) in Path(f"/proc/{proc.name}/root").resolve().as_posix():
                    found.append(f"process {proc.name}")
            except OSError:
                pass
    return found


@pytest.fixture(scope="module", params=sorted(CLUSTERS))
def cluster(request, tmp_path_factory, ssh_agent):  # noqa: F811 - the imported fixture
    values = dict(CLUSTERS[request.param])
    work = tmp_path_factory.mktemp(f"kose2e-{request.param}")
    values.update(
        ssh_public_keys=[ssh_agent.public_key],
        ssh_allowed_cidrs=[values["public_cidr"]],
        external_network_name="local",
        base_image="debian-12-local",
    )
    (work / "cluster.tfvars.json").write_text(json.dumps(values))
    kos = Kos(work, base_env(SSH_AUTH_SOCK=ssh_agent.sock))
    c = LocalCluster(kos, {**DEFAULTS, **values})
    c.up = kos("up", *c.args, "--yes", timeout=1800)
    yield c
    if c.down is None or leftovers(c.name, c.state):
        kos("down", *c.args, "--yes", timeout=600)


def tcp_peer_seen_by_listener(listen_ip, connect_from_netns, timeout=10):
    """
    Listen on ``listen_ip`` (this machine, the local cloud's "internet"), connect from
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
