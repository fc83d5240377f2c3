"""
A real salt-master on a test bridge and real salt-minions, each in its own network
namespace with the stand-ins on PATH and its own stand-in root (its "disk"). The state
tree is the repository's; the pillar tree is the repository's plus the per-deployment
layers a test writes.

The fixtures here start one deployment per package: the one its ``distribution`` fixture
names, a ``Deployment`` class (which distribution, which hosts, domain and network). This
package's is microk8s; tests/integration/kubeadm and tests/integration/kubeadm_upgrade name
kubeadm deployments of their own. Each of those imports the fixtures into its conftest.py:
pytest keeps a package fixture for the package whose conftest.py defines it
(https://docs.pytest.org/en/stable/how-to/fixtures.html#fixture-scopes), so each gets its own
master and minions, stopped when its tests are done, and none is reused for another
``distribution``.
"""

import contextlib
import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
import shutil
import signal
import textwrap
from pathlib import Path

import attr
import pytest
import yaml
from saltfactories.daemons.minion import SaltMinion

from tests.netlab import NetLab, can_use_netns

REPO = Path(__file__).resolve().parents[2]
# The Salt timing the salt_master formula gives every kos master (its defaults, one source):
# a lab's master waits for busy minions as a deployed one does. With Salt's own
# gather_job_timeout (10 s) a wave's highstates counted as gone on a loaded machine.
_MASTER_DEFAULTS = yaml.safe_load((REPO / "salt" / "salt" / "salt_master" / "defaults.yaml")
                                  .read_text())
MASTER_TIMING = {key: _MASTER_DEFAULTS[key]
                 for key in ("timeout", "gather_job_timeout", "publish_drain_timeout")}
STANDINS = REPO / "tests" / "standins"
DOMAIN = "kos-it.test"
DOMAIN_SLS = DOMAIN.replace(".", "_")
CIDR = "10.250.0.0/24"

pytestmark = [pytest.mark.integration, pytest.mark.netns]


@attr.s(kw_only=True, slots=True)
class NetnsMinion(SaltMinion):
    """A salt-minion started inside a network namespace."""

    netns = attr.ib()

    def cmdline(self, *args):
        return ["ip", "netns", "exec", self.netns, *super().cmdline(*args)]


def kill_standin_daemons(root):
    for pidfile in Path(root).rglob("kos-standin-*.pid"):
        try:
            os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
        except (ValueError, ProcessLookupError, PermissionError):
            pass


HOSTNAMES = ["salt", "k8s-cp-1", "k8s-worker-1", "k8s-worker-2", "k8s-worker-3"]
# What Terraform created at first; k8s-worker-3 runs a minion that the deployment gains
# later (test_deploy: adding a node).
MEMBERS = HOSTNAMES[:4]
# What a test host may change of the test machine: its stand-in /etc/hosts, nothing else.
TEST_MACHINE = {
    "core": {"manage": {key: key == "hosts" for key in (
        "sysctl", "limits", "locale", "banners", "sshd", "resolver", "hosts", "packages",
        "minion", "users")}},
    "salt_master": {"manage_service": False},
}


class Deployment:
    """The pillar a Terraform run would hand the master, for the test hosts; the class
    attributes say which distribution and which hosts, domain and network (a subclass per
    deployment)."""

    distribution = "microk8s"
    cluster_name = "kos-it"
    domain = DOMAIN
    prefix = "kosit"
    cidr = CIDR
    public_cidr = "10.249.0.0/24"
    hostnames = HOSTNAMES
    members = MEMBERS
    # executables the lab's hosts run besides the stand-ins
    needs = ()

    def __init__(self, pillar_dir, lab, names):
        self.pillar_dir = Path(pillar_dir)
        self.lab = lab
        self.names = list(names)

    def add(self, name):
        """Terraform created one more host: the Terraform layer lists it."""
        self.names.append(name)
        self.write("_from_terraform.sls", self.from_terraform())

    @property
    def domain_sls(self):
        return self.domain.replace(".", "_")

    def fqdn(self, hostname):
        return f"{hostname}.{self.domain}"

    def write(self, path, data):
        target = self.pillar_dir / path
        target.parent.mkdir(parents=True, exist_ok=True)
        text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
        target.write_text(textwrap.dedent(text))
        return target

    def remove(self, path):
        (self.pillar_dir / path).unlink(missing_ok=True)

    def from_terraform(self):
        hosts = self.lab.hosts
        nodes = {}
        for name in self.names:
            if name.startswith("k8s-"):
                role = "control_plane" if name.startswith("k8s-cp-") else "worker"
                nodes[self.fqdn(name)] = {"role": role, "ip": hosts[name].address}
        return {
            "kos": {
                "distribution": self.distribution,
                "cluster_name": self.cluster_name,
                "domain": self.domain,
                "deploy_user": "debian",
                "networks": {
                    "public_cidr": self.public_cidr,
                    "private_cidr": self.cidr,
                    "pod_cidr": "10.244.0.0/16",
                    "service_cidr": "10.96.0.0/12",
                },
                "salt_master": {"id": self.fqdn("salt"), "ip": hosts["salt"].address},
                "nodes": nodes,
                "first_control_plane": self.fqdn("k8s-cp-1"),
                "api": {"floating_ip": "203.0.113.10", "admin_ip": None},
            },
            "core": {"users": []},
        }

    def environment(self):
        """The environment's pillar layer: this environment is the test machine itself."""
        self.write(f"environments/{self.domain_sls}.sls",
                   {**TEST_MACHINE, "microk8s": {"ready_timeout": 30}})

    def host(self, root, name):
        """Lay out host ``name``'s disk under ``root``; its most specific pillar layer."""
        return host_layer(root, name)

    def minion_environ(self, environ, root, host):
        """A minion's environment: the stand-ins first on PATH, its own stand-in root."""
        path = os.environ.get("PATH", "/usr/bin:/bin")
        return dict(
            environ,
            PATH=f"{STANDINS / 'bin'}:{root / 'snap' / 'bin'}:{path}",
            KOS_STANDIN_ROOT=str(root),
            # the namespaces have no default route to find it from
            KOS_STANDIN_IP=host.address,
        )

    def minion_overrides(self):
        """What a minion's configuration adds to the master and interface it talks on."""
        return {}

    def clean(self, host_roots):
        """Stop what the tests started on the hosts."""
        kill_standin_daemons(host_roots)


@pytest.fixture(scope="package")
def distribution():
    """The deployment this package's tests run (a subpackage names its own)."""
    return Deployment


@contextlib.contextmanager
def netlab_up(prefix, cidr, needs=()):
    """A NetLab up for the block, or the test skipped where this machine cannot host one."""
    if not can_use_netns():
        pytest.skip("needs root and network namespaces")
    for program in needs:
        if not shutil.which(program):
            pytest.skip(f"needs {program} (Debian package {program})")
    lab = NetLab(prefix=prefix, cidr=cidr).up()
    try:
        yield lab
    finally:
        lab.down()


@pytest.fixture(scope="package")
def netlab(distribution):
    with netlab_up(distribution.prefix, distribution.cidr, distribution.needs) as lab:
        yield lab


@pytest.fixture(scope="package")
def host_roots(tmp_path_factory):
    return tmp_path_factory.mktemp("hosts")


@pytest.fixture(scope="package")
def pillar_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("pillar-layers")


def host_layer(root, name):
    """A host's "disk" under ``root`` (its /etc/hostname, which the microk8s stand-in's join
    resolves, and /etc/hosts), and its most specific pillar layer: where that disk is."""
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc" / "hostname").write_text(f"{name}\n")
    (root / "etc" / "hosts").write_text("127.0.0.1 localhost\n")
    return {
        "core": {"hosts_file": str(root / "etc" / "hosts")},
        "kos": {"state_dir": str(root / "etc" / "kos")},
        "microk8s": {"snap_data": str(root / "var/snap/microk8s/current")},
        "salt_master": {"config_file": str(root / "etc/salt/master.d/kos.conf"),
                        "cachedir": str(root / "var/cache/salt/master")},
    }


@pytest.fixture(scope="package")
def deployment(distribution, netlab, pillar_dir, host_roots):
    for name in distribution.hostnames:
        # Everything a host talks to is on the bridge (see NetLab.add_host).
        netlab.add_host(name, default_route=False)
    dep = distribution(pillar_dir, netlab, distribution.members)
    dep.write("_from_terraform.sls", dep.from_terraform())
    dep.environment()
    for name in distribution.hostnames:
        dep.write(f"minions/{dep.domain_sls}/{name}.sls", dep.host(host_roots / name, name))
    yield dep
    dep.clean(host_roots)


@pytest.fixture(scope="package")
def files_dir(tmp_path_factory):
    """A second file root for files the tests deliver (file_transfer)."""
    return tmp_path_factory.mktemp("state-files")


@pytest.fixture(scope="package")
def salt_master(salt_factories, netlab, deployment, files_dir, release_root):
    factory = salt_factories.salt_master_daemon(
        f"{deployment.cluster_name}-master",
        overrides={
            "interface": netlab.gateway,
            "file_roots": {"base": [str(REPO / "salt" / "salt"), str(files_dir), str(release_root)]},
            "pillar_roots": {"base": [str(REPO / "pillar"), str(deployment.pillar_dir)]},
            "minion_data_cache": True,
            **MASTER_TIMING,
        },
    )
    with factory.started(start_timeout=120):
        yield factory


def netns_minion(salt_master, netlab, deployment, host_roots, name):
    """A minion factory for host ``name``: in its namespace, with the stand-ins on PATH and
    its own stand-in root."""
    host = netlab.hosts[name]
    factory = salt_master.salt_minion_daemon(
        deployment.fqdn(name),
        factory_class=NetnsMinion,
        netns=host.netns,
        overrides={"master": netlab.gateway, "interface": "0.0.0.0",
                   **deployment.minion_overrides()},
    )
    # The manager hands every daemon the same environ dict: give this one its own.
    factory.environ = deployment.minion_environ(factory.environ, host_roots / name, host)
    return factory


@pytest.fixture(scope="package")
def minions(salt_master, netlab, deployment, host_roots):
    started = {}
    try:
        for name in deployment.hostnames:
            started[name] = netns_minion(salt_master, netlab, deployment, host_roots, name)
        # Started together: each start waits for the master to see the minion.
        with ThreadPoolExecutor(len(started)) as pool:
            for fut in [pool.submit(f.start, start_timeout=180) for f in started.values()]:
                fut.result()
        yield started
    finally:
        with ThreadPoolExecutor(max(1, len(started))) as pool:
            list(pool.map(lambda f: f.terminate(), started.values()))


@pytest.fixture(scope="package")
def salt_run(salt_master):
    return salt_master.salt_run_cli(timeout=900)


@pytest.fixture(scope="package")
def salt_cli(salt_master):
    return salt_master.salt_cli(timeout=600)


def root_of(host_roots, name):
    return Path(host_roots) / name


def wipe(path):
    shutil.rmtree(path, ignore_errors=True)


def orchestrate(salt_run, pillar=None, sls="orch.deploy", test=False):
    """salt-run state.orchestrate: the run and its steps ``{state key: result}``."""
    args = ["state.orchestrate", sls] + (["test=True"] if test else [])
    if pillar is not None:
        args.append(f"pillar={json.dumps(pillar)}")
    ret = salt_run.run(*args)
    data = ret.data
    # salt-run --out=json: {"data": {"<master>_master": {state id: result}}, "retcode": n}
    steps = next(iter(data["data"].values())) if isinstance(data, dict) and "data" in data else data
    return ret, steps


def by_id(steps):
    return {v["__id__"]: v for v in steps.values()}


EMPTY = hashlib.sha256(b"").hexdigest()


def mine_digest(salt_cli, reader, source, function, field):
    """What ``reader`` gets from the mine, as a digest: a job's return lands in the minion
    log, so a test that asked for the credential itself would leak it there."""
    template = ("{{ ((salt['mine.get']('%s', '%s').get('%s') or {}).get('%s') or '') | sha256 }}"
                % (source, function, source, field))
    ret = salt_cli.run("slsutil.renderer", f"string={template}", "default_renderer=jinja",
                       minion_tgt=reader)
    assert ret.returncode == 0, ret
    return ret.data.strip()


def converged(step):
    """The minions a salt.state step ran on, from its comment ("States ran successfully.
    Updating a. No changes made to b, c."): its changes name only the minions that changed."""
    names = set()
    for part in step["comment"].split(". "):
        for prefix in ("Updating ", "No changes made to "):
            if part.startswith(prefix):
                names |= {n.strip(" .") for n in part[len(prefix):].split(",")}
    return names


def ran_on(step):
    """The minions a salt.function step ran on (its changes hold each one's return)."""
    return set((step.get("changes") or {}).get("ret") or {})


def highstated(steps):
    """{step id: minions} of every orchestration step that ran a highstate."""
    found = {}
    for step in steps.values():
        sid = step["__id__"]
        if sid in ("kos-orch-deploy-first-control-plane", "kos-orch-deploy-wave") or \
                sid.startswith(("kos-orch-deploy-control-plane-", "kos-orch-deploy-wave-")):
            ran = converged(step) or ran_on(step)
            if ran:
                found[sid] = ran
    return found
