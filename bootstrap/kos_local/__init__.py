"""
``--cloud local``: a real OpenStack on this machine, for rehearsals and tests. A cloud of
its own beside kos (the entry point ``local`` of the group ``kos.clouds``): it imports the
product, never the reverse.

kos brings up an all-in-one OpenStack (Zed, from Debian's packages) on this machine, or
finds it up (``openstack.cloud``): one cloud for every local cluster, each cluster in a
project of its own. It gives the cluster its project and a ``clouds.yaml`` entry, and
then runs exactly the OpenStack path: preflight through openstacksdk, ``terraform apply`` of ``terraform/`` with
the real provider, converge through the bastion's floating IP. Nova's servers become
systemd-nspawn hosts (``openstack.materialiser``) that boot with real cloud-init from
Nova's config drive and take their port's address from Neutron's DHCP; Neutron's own
agents do the bridging, security groups, routing and floating-IP NAT. ``kos down`` removes
the cluster and its project; the cloud goes with its last cluster.

The kubeadm distribution runs for real: Kubernetes built from source once per version
(``kubernetes``) is this cloud's mirror of pkgs.k8s.io and of the registry, bound into
every host read-only; the hosts can run a kubelet and containers (``hosts``), and the
formula installs, joins and networks the nodes through its ordinary states, pointed at
the mirror by one pillar layer (``pillar_layer``). microk8s (a snap) cannot run here: it is
the test stand-ins (tests/standins), and the outputs say so (``simulated``), so everything
kos reports about such a cluster says "simulated".
"""

import contextlib
import dataclasses
import os
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml
from keystoneauth1 import exceptions as ksa_exceptions
from openstack import exceptions as sdk_exceptions

from kos import ccm, distributions, ui
from kos.backend import Backend
from kos.cloud import Finding, raise_on_failures
from kos.errors import CleanupError, ConvergeError, KosError
from kos.ssh import agent_findings
from kos.state import fingerprint

from . import hosts as hosts_mod
from . import amphora, cloud_provider, csi, kubernetes, net, provider, rootfs
from .image import files_digest
from .openstack import config as cloud_config
from .openstack import materialiser
from .openstack.cloud import RESERVED, Cloud, cloud_name
from .openstack.image import layer as cloud_layer

REPO = hosts_mod.REPO
JOIN_SECONDS_ENV = "KOS_LOCAL_JOIN_SECONDS"
INOTIFY_INSTANCES = 8192
# What the cloud itself takes: its processes' proportional set size once booted, Octavia's
# services and the three compute services included (docs/benchmarks.md), rounded up.
CLOUD_MEMORY_MB = 4400
# An amphora (haproxy, the agent, rsyslog on a booted host): between its measured
# proportional and resident set sizes (docs/benchmarks.md).
AMPHORA_MEMORY_MB = 250
# One booted host without Kubernetes (bastion, salt master, a simulated microk8s node):
# measured on this rehearsal cloud.
HOST_MEMORY_MB = 160
# A kubeadm control plane (etcd, API server, controller-manager, scheduler, kubelet,
# containerd): about 1 GiB, observed on this rehearsal cloud. The hosts share this machine's
# kernel, so that is below the 2 GB per machine kubeadm asks of a VM
# (https://kubernetes.io/docs/setup/production-environment/tools/kubeadm/install-kubeadm/#before-you-begin).
KUBEADM_CONTROL_PLANE_MB = 1024
# A kubeadm worker (kubelet, containerd, kube-proxy, no workload): an estimate, not measured.
KUBEADM_WORKER_MB = 300
# The Cinder CSI (pillar_layer turns it on), measured on this rehearsal cloud: the node
# service and its registrar on every node, the controller and its sidecars on one.
CSI_NODE_MB = 45
CSI_CONTROLLER_MB = 175

# A cluster's networks: none may overlap the cloud's own addresses on this machine.
CIDRS = ("public_cidr", "private_cidr", "pod_cidr", "service_cidr")
# Where the hosts see this machine's Kubernetes builds (read-only).
MIRROR = "/var/lib/kos-mirror/kubernetes"
# microk8s is the stand-ins: the materialiser puts them on the minions' PATH.
SIMULATED = ("microk8s",)


def pillar_layer(version=None):
    """The pillar that points the kubeadm formula at this cloud's mirror, and what these
    hosts differ in from a VM: the kernel's modules are this machine's (a container loads
    none), its conntrack table and OOM scores are not the host's to change, and the
    cloud-controller-manager and Cinder CSI are the ones built beside Kubernetes
    (cloud_provider, csi)."""
    version = version or kubernetes.pinned_version()
    here = f"{MIRROR}/{kubernetes.minor_dir(version)}"
    ccm = cloud_provider.release(version)
    defaults = kubernetes.formula_defaults()
    csi_images = csi.images(defaults["csi"]["images"], version)
    return {
        "kubeadm": {
            "repo": {"url": f"file:{here}/deb/",
                     "key_url": f"file://{here}/deb/{kubernetes.keyring_name()}"},
            "images": {"archive_dir": f"{here}/images"},
            "containerd": {"cni_bin_dir": "/usr/lib/cni", "restrict_oom_score_adj": True},
            # routed: kube-router is not served by the module proxy in a version without
            # known flaws, and this kernel has no IPVS for its service proxy. Routes follow
            # the nodes within a minute: each sync is a Salt job and a kubectl (~0.7 s of a
            # core), which every kubelet host of this 2-core machine ran three times a
            # minute at the formula's 20 s.
            "network": {"mode": "routed", "sync_seconds": 60},
            "kube_proxy": {"conntrack_max_per_core": 0},
            "ccm": {"enabled": True, "image": cloud_provider.image_ref(
                defaults["ccm"]["image"], ccm)} if ccm else {
                "enabled": False},
            # Cinder keeps its volumes in the zone nova, and kos-az-2 is Nova's only
            # (cloud_config.COMPUTE_ZONES): volumes are made in nova whatever the node's zone,
            # and a node in kos-az-2 attaches them. XFS: ext4 grows online only with
            # CAP_SYS_RESOURCE (EXT4_IOC_RESIZE_FS), which this machine does not give;
            # xfs_growfs needs CAP_SYS_ADMIN only.
            "csi": {"enabled": True, "ignore_volume_az": True, "images": csi_images,
                    "storage_classes": [
                        {**sc, "fstype": "xfs", "availability": cloud_config.DEFAULT_ZONE}
                        for sc in defaults["csi"]["storage_classes"]]}
            if csi_images else {"enabled": False},
            "manage": {"kernel_modules": False},
        },
    }


def hosts_memory_mb(values, nodes):
    """What the cluster's hosts take on this cloud, by shape: a simulated distribution's
    nodes are plain hosts; kubeadm's run Kubernetes, a control plane more than a worker;
    the API load balancer is an amphora. ``nodes``: the node set (kos.inputs.Inputs.nodes)."""
    amphora = AMPHORA_MEMORY_MB if values.get("api_load_balancer") == "octavia" else 0
    if values["kubernetes_distribution"] in SIMULATED:
        return HOST_MEMORY_MB * (len(nodes) + 2) + amphora
    control_planes = sum(1 for node in nodes.values() if node["role"] == "control_plane")
    return (HOST_MEMORY_MB * 2 + KUBEADM_CONTROL_PLANE_MB * control_planes
            + KUBEADM_WORKER_MB * (len(nodes) - control_planes)
            + CSI_NODE_MB * len(nodes) + CSI_CONTROLLER_MB + amphora)


class LocalBackend(Backend):
    name = "local"
    create_step = "terraform-apply"

    def __init__(self, settings, state):
        from kos.backends import OpenStackBackend

        super().__init__(settings, state)
        self.cloud = Cloud()
        self.entry = cloud_name(state.cluster)
        self._noted = False
        # The same backend a real cloud gets, pointed at this one's clouds.yaml entry.
        self.openstack = OpenStackBackend(
            dataclasses.replace(settings, os_cloud=self.entry), state
        )

    def _environment(self):
        os.environ["OS_CLOUD"] = self.entry
        os.environ.setdefault("OS_CLIENT_CONFIG_FILE", str(self._clouds_yaml()))
        os.environ["TF_CLI_CONFIG_FILE"] = str(provider.ensure())
        os.environ["KOS_PROVIDER_LOCK_FILE"] = str(provider.MIRROR_LOCK_FILE)

    def _note_ignored_cloud(self):
        """The operator's cloud selection means nothing here: this cloud writes its own
        clouds.yaml entry and uses only that one. Said once, before anything is read."""
        given = [f"{name}={value}" for name, value in
                 (("--os-cloud", self.settings.os_cloud), ("OS_CLOUD", os.environ.get("OS_CLOUD")))
                 if value and value != self.entry]
        if given and not self._noted:
            self._noted = True
            ui.warn(f"{' and '.join(given)} ignored with --cloud local: the rehearsal cloud uses "
                    f"its own clouds.yaml entry, {self.entry}")

    def _clouds_yaml(self):
        from .openstack.cloud import clouds_yaml_path

        return clouds_yaml_path()

    # -- Backend -----------------------------------------------------------------------

    def preflight(self, inputs, check_quota=True):
        values = inputs.values
        findings = []
        self._note_ignored_cloud()
        if os.geteuid() != 0:
            findings.append(Finding("local", False, "the local cloud needs root (namespaces, mounts, nspawn)",
                                    "run kos as root (sudo)"))
        tools = ["systemd-nspawn", "nsenter", "ip", "mount", "losetup", "ssh-keygen", "go"]
        if not all(layer.ready() for layer in (cloud_layer(), rootfs.layer(), amphora.layer())):
            tools.append("debootstrap")
        missing = [t for t in tools if not shutil.which(t)]
        findings.append(Finding(
            "local tools", not missing,
            f"missing {', '.join(missing)}" if missing else "systemd-nspawn and tools found",
            "apt-get install systemd-container debootstrap iproute2 util-linux golang" if missing else "",
        ))
        if values["first_control_plane_access"] != "floating_ip":
            findings.append(Finding(
                "first_control_plane_access", False,
                "first_control_plane_access = admin_network has no local equivalent "
                "(the rehearsal cloud has no admin network)",
                'set first_control_plane_access = "floating_ip" for --cloud local'))
        inside = [c for c in values["ssh_allowed_cidrs"]
                  if net.ipaddress.ip_network(c).overlaps(net.SPACE)]
        if not inside:
            findings.append(Finding(
                "ssh_allowed_cidrs", False,
                f"ssh_allowed_cidrs {values['ssh_allowed_cidrs']} does not let this machine in: "
                f"it reaches the rehearsal cloud's floating IPs from {net.SPACE}",
                f'add "{net.SPACE}" to ssh_allowed_cidrs for --cloud local'))
        findings += self._cloud_findings(values)
        findings.append(memory_finding(values, inputs.nodes, self.cloud.running(),
                                       _mem_available_mb()))
        findings += agent_findings(values["ssh_public_keys"])
        if self.cloud.usable() and self.cloud.attached(self.state.cluster):
            # The cluster's project exists: check it as any OpenStack would be checked.
            self._environment()
            findings += [f for f in self._openstack_findings(inputs, check_quota)
                         if f.check != "ssh-agent"]
        return findings

    def _openstack_findings(self, inputs, check_quota):
        """The cluster's project checked as any OpenStack's, and the placement its server
        groups ask for counted with the cloud's admin (a project member may not list the
        compute hosts)."""
        from kos import placement

        found = [f for f in self.openstack.preflight(inputs, check_quota)
                 if f.check != "placement"]
        return found + placement.findings(self.cloud.admin(), inputs.values, inputs.nodes)

    def _cloud_findings(self, values):
        """What a cluster must not share with the cloud: a project name it keeps for
        itself, or addresses its external network uses."""
        found = []
        if values["cluster_name"] in RESERVED:
            found.append(Finding(
                "cluster_name", False,
                f"cluster_name {values['cluster_name']!r} is a project the rehearsal cloud keeps "
                "for itself (each cluster gets a project of its name)",
                f"choose a cluster_name other than {' or '.join(RESERVED)}"))
        plan = self.cloud.plan() if self.cloud.running() else None
        for key in CIDRS:
            if plan and net.ipaddress.ip_network(values[key]).overlaps(plan.block):
                found.append(Finding(
                    key, False,
                    f"{key} {values[key]} overlaps {plan.block}, the running rehearsal cloud's "
                    "external network and its management link",
                    f"choose a {key} outside {plan.block}"))
        return found

    def create(self, inputs, steps, leaving=None):
        values = inputs.values
        self.state.ensure()
        fp = fingerprint(inputs.fingerprint)
        steps.run("local-images", fp, "the rehearsal cloud's images and Terraform provider "
                  "(built once per machine)", lambda: self._builds(values), always=True)
        steps.run("local-cloud", fp, "the rehearsal cloud: OpenStack on this machine",
                  lambda: self._cloud_up(values), always=True)
        self._environment()
        steps.run(
            "cloud-preflight", fp, "preflight against the rehearsal cloud's API",
            lambda: raise_on_failures(self._openstack_findings(
                inputs, check_quota=steps.status("terraform-apply") is None)) or {},
            always=True,
        )
        outputs = self._own(self.openstack.create(inputs, steps, leaving=leaving))
        if values["kubernetes_distribution"] in SIMULATED:
            ui.info(f"{values['kubernetes_distribution']} on this cloud is simulated "
                    "(test stand-ins)")
        return outputs

    @staticmethod
    def _own(outputs):
        """Terraform's outputs, and what this cloud says of itself (kos.backends)."""
        return {**outputs, "simulated": list(SIMULATED)} if outputs else outputs

    @staticmethod
    def _builds(values):
        """What this machine builds once: the hosts' and the cloud's images, the provider,
        side by side (the images wait on the mirror and the disk, the provider on the CPU);
        and, for kubeadm, Kubernetes started in the background (pillar_layers waits)."""
        if values["kubernetes_distribution"] not in SIMULATED:
            kubernetes.start()
        builds = [(what, ensure) for what, ready, ensure in once_per_machine() if not ready()]
        with ThreadPoolExecutor(len(builds) or 1) as pool:
            for future in [pool.submit(ensure) for _, ensure in builds]:
                future.result()
        return {"built": [what for what, _ in builds]}

    def _cloud_up(self, values):
        avoid = [values[k] for k in CIDRS]
        with self.cloud.lock(), cloud_api_errors(self.cloud):
            pid, booted = bring_up(self.cloud, avoid)
            name = self.cloud.attach(self.state.cluster,
                                     self._profile(values["kubernetes_distribution"]))
        plan = self.cloud.plan()
        return {"cloud": name, "api": self.cloud.auth_url(), "external": str(plan.external),
                "materialiser": pid, "booted": booted}

    def read_consoles(self):
        """What every server's console printed about its keys, read as on any OpenStack."""
        return self.openstack.read_consoles()

    def read_master_consoles(self, clusters):
        """A syndic's master is read in its own cloud (``kos-local-<cluster>`` in clouds.yaml),
        as a top on OpenStack reads its project's."""
        from kos import cloud

        found = dict.fromkeys(clusters)
        for name in clusters:
            try:
                conn = cloud.connect(cloud_name(name))
            except KosError:
                continue  # no cloud of that cluster here (yet): it is named as waiting
            found.update(cloud.read_master_consoles(conn, [name]))
        return found

    def _profile(self, distribution):
        """How the materialiser makes this cluster's hosts."""
        simulated = distribution in SIMULATED
        mirror = kubernetes.root(kubernetes.pinned_version()).parent
        mirror.mkdir(parents=True, exist_ok=True)
        standins = REPO / "tests" / "standins"
        binds = [str(p) for p in hosts_mod.bound_paths()] + [f"{mirror}:{MIRROR}"]
        return {
            "state": str(self.state.path),
            "distribution": distribution,
            # the stand-ins' own directory, on a host they stand in on, and no more
            "binds": binds + ([str(standins)] if simulated else []),
            # A real kubelet's hosts; the stand-ins on PATH only where they stand in.
            "kubelet": not simulated,
            "standins": str(standins) if simulated else None,
            "standin_env": {"KOS_STANDIN_DELAY": os.environ.get(JOIN_SECONDS_ENV, "0")},
        }

    def outputs(self):
        if not self.cloud.attached(self.state.cluster):
            return {}
        self._environment()
        return self._own(self.openstack.outputs())

    def plan(self, inputs, plan_file):
        self.state.ensure()
        self._builds(inputs.values)
        self._cloud_up(inputs.values)
        self._environment()
        return self.openstack.plan(inputs, plan_file)

    def project(self):
        if not (self.cloud.usable() and self.cloud.attached(self.state.cluster)):
            return None
        self._environment()
        return self.openstack.conn

    def pillar_layers(self, outputs):
        """The layer that points the formula at this cloud's mirror, once the mirror holds
        the pinned release (the orchestration after it installs from there)."""
        if distributions.planned(outputs) not in SIMULATED:
            version = kubernetes.pinned_version()
            # Announced only when it waits for a build (otherwise it links the minor at once).
            waiting = contextlib.nullcontext() if kubernetes.built(version) else ui.step(
                f"Kubernetes {version} for the cloud's mirror (built once per machine; "
                f"log: {kubernetes.log_path(version)})")
            with waiting:
                kubernetes.ensure(version)
        return {"_cloud.sls": "# Written by kos for its rehearsal cloud: its mirror, and what "
                "these hosts cannot do.\n" + yaml.safe_dump(pillar_layer(), sort_keys=True)}

    def destroy(self, inputs, steps):
        cluster = inputs.cluster_name
        fp = fingerprint(cluster)
        # Without its project a cluster never got as far as a Terraform apply.
        if self.cloud.usable() and self.cloud.attached(cluster):
            self._environment()
            start_materialiser(self.cloud)
            self.openstack.destroy(inputs, steps)
            steps.run("cloud-empty", fp, "check nothing of the cluster is left in the cloud",
                      self.leftovers_in_cloud, always=True)

        def leave():
            with self.cloud.lock():
                removed = self.cloud.detach(cluster)
            forget_servers(self.state.path)
            return {"removed": removed}

        steps.run("local-leave", fp, "remove the cluster's project from the rehearsal cloud",
                  leave, always=True)
        others = self.cloud.clusters()
        if others:
            ui.ok(f"local cluster {cluster} destroyed; the rehearsal cloud stays up for "
                  f"{', '.join(others)}")
            return
        if os.environ.get("KOS_LOCAL_KEEP_CLOUD") == "1":
            ui.ok(f"local cluster {cluster} destroyed; KOS_LOCAL_KEEP_CLOUD=1: the rehearsal "
                  "cloud stays up")
            return

        def teardown():
            with self.cloud.lock():
                if self.cloud.clusters():
                    return {"kept": self.cloud.clusters()}  # a cluster came meanwhile
                return {"removed": len(self.cloud.destroy())}

        done = steps.run("local-destroy", fp, "stop the rehearsal cloud (its last cluster went) "
                         "and remove it from this machine", teardown, always=True)
        if "kept" in (done or {}):
            ui.ok(f"local cluster {cluster} destroyed; the rehearsal cloud stays up for "
                  f"{', '.join(done['kept'])}, which came meanwhile")
        else:
            ui.ok(f"local cluster {cluster} and the rehearsal cloud destroyed")

    def leftovers_in_cloud(self):
        """What of the cluster is still in the cloud's project after terraform destroy."""
        conn = self.openstack.conn
        left = {
            "servers": [s.name for s in conn.compute.servers()],
            "ports": [p.id for p in conn.network.ports(project_id=conn.current_project_id)
                      if not (p.device_owner or "").startswith("network:")],
            "floating_ips": [f.floating_ip_address for f in conn.network.ips(
                project_id=conn.current_project_id)],
            "volumes": [v.name or v.id for v in conn.block_storage.volumes()],
            "routers": [r.name for r in conn.network.routers(project_id=conn.current_project_id)],
            "networks": [n.name for n in conn.network.networks(project_id=conn.current_project_id)],
            "application credentials": ccm.existing(conn, self.state.cluster),
        }
        left = {k: v for k, v in left.items() if v}
        if left:
            raise CleanupError(
                "still in the rehearsal cloud after terraform destroy: "
                + "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in left.items()),
                fix="re-run kos down; if it stays, report it (kos left it behind)",
            )
        return {"empty": True}


def forget_servers(state_dir):
    """A cluster's records of servers that no longer exist (its project or the whole cloud
    went): Terraform's state and the pinned host keys."""
    for name in ("terraform/terraform.tfstate", "terraform/terraform.tfstate.backup",
                 "known_hosts"):
        (Path(state_dir) / name).unlink(missing_ok=True)


def once_per_machine():
    """The builds every cloud and cluster here share, as (what, ready, ensure)."""
    return [
        ("the hosts' image", rootfs.layer().ready, rootfs.layer().ensure),
        ("the amphora image", amphora.layer().ready, amphora.layer().ensure),
        ("the cloud's image", cloud_layer().ready, cloud_layer().ensure),
        ("the Terraform provider", provider.binary().exists, provider.ensure),
    ]


def bring_up(cloud, avoid=()):
    """The rehearsal cloud up and its materialiser running (the caller holds the cloud's
    lock); returns the materialiser's PID and whether the cloud booted now."""
    _raise_inotify()
    booted = cloud.ensure(avoid, rootfs.layer().ensure(), amphora.layer().ensure())
    return start_materialiser(cloud), booted


def start_materialiser(cloud):
    cfg = {"cloud": cloud.name, "local_dir": str(cloud.root),
           "venv_bin": str(Path(sys.prefix) / "bin")}
    here = Path(__file__).resolve().parent
    code = files_digest(here / "openstack" / "materialiser.py", here / "hosts.py",
                        here / "net.py")
    return materialiser.start(cfg, cloud.root / "materialiser.log", code)


@contextlib.contextmanager
def cloud_api_errors(cloud):
    """The cloud's API failing while kos sets it up: one error that says to re-run."""
    try:
        yield
    except (ksa_exceptions.ClientException, sdk_exceptions.SDKException) as exc:
        raise ConvergeError(
            f"the rehearsal cloud's API failed while kos set it up: {exc}",
            fix="re-run (it resumes where it stopped); the cloud's logs are under "
            f"{cloud.machine.path('/var/log')}",
        ) from exc


def _raise_inotify():
    # Every host's systemd takes inotify instances; the default 128 stops nspawn at ~22 hosts.
    import subprocess

    path = Path("/proc/sys/fs/inotify/max_user_instances")
    if int(path.read_text()) < INOTIFY_INSTANCES:
        subprocess.run(["sysctl", "-q", "-w", f"fs.inotify.max_user_instances={INOTIFY_INSTANCES}"],
                       check=False)


def memory_finding(values, nodes, cloud_running, avail):
    """Whether this machine has the memory for the cluster's hosts, and for the cloud too
    when it is not up yet (a running cloud's memory is already taken)."""
    hosts = len(nodes) + 2
    hosts_mb = hosts_memory_mb(values, nodes)
    need = hosts_mb + (0 if cloud_running else CLOUD_MEMORY_MB)
    cloud = "the cloud is up" if cloud_running else f"the cloud {CLOUD_MEMORY_MB} MiB more"
    return Finding(
        "local memory", avail is None or avail > need,
        f"{hosts} {values['kubernetes_distribution']} hosts need about {hosts_mb} MiB "
        f"({cloud}); {avail} MiB available", "remove nodes from kubernetes_nodes, or free memory")


def _mem_available_mb():
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None
