"""
``--cloud local``: the OpenStack plan rebuilt on this machine, for rehearsals and tests.

VMs are systemd-nspawn containers (see ``hosts``), networks are bridges in a namespace of
their own (see ``net``), the image is a cached debootstrap (see ``rootfs``) and the
addressing plan and pillar are those Terraform derives from the same variables (see
``plan``). Converge, status and kubeconfig then run exactly as for OpenStack: SSH to the
bastion's "floating IP", on to the salt master, Salt from there.

Kubernetes cannot run here: the distributions are the test stand-ins (tests/standins),
and everything kos reports about such a cluster says "simulated".
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import yaml

from .. import ui
from ..backend import Backend
from ..cloud import Finding
from ..errors import InputError, KosError
from ..ssh import agent_findings
from ..state import fingerprint
from . import hosts as hosts_mod
from . import net, plan, rootfs

REPO = hosts_mod.REPO
INOTIFY_INSTANCES = 8192
# Roughly what one booted host costs (systemd, sshd, a salt-minion): for the preflight.
HOST_MEMORY_MB = 160
JOIN_SECONDS_ENV = "KOS_LOCAL_JOIN_SECONDS"

# What these hosts cannot do: no package repository (the image has what the states
# install), no kubelet or containerd to run, no kernel of their own, and no OpenStack
# API for a cloud-controller-manager to talk to.
CLOUD_LAYER = {
    "kubeadm": {
        "ccm": {"enabled": False},
        "manage": {
            "packages": False,
            "services": False,
            "swap": False,
            "kernel_modules": False,
            "sysctl": False,
        }
    },
}


def _master_config():
    """/etc/salt/master.d/kos.conf as the salt_master formula renders it with its defaults,
    so the formula's first run finds it unchanged and need not restart the master."""
    import jinja2

    formula = REPO / "salt" / "salt" / "salt_master"
    cfg = yaml.safe_load((formula / "defaults.yaml").read_text())
    template = jinja2.Template((formula / "files" / "kos.conf.jinja").read_text())
    return cfg["config_file"], template.render(cfg=cfg) + "\n"


class LocalBackend(Backend):
    name = "local"
    simulated = True
    create_step = "local-hosts"

    def __init__(self, settings, state):
        super().__init__(settings, state)
        self.dir = state.path / "local"

    # -- helpers -------------------------------------------------------------------

    def _hosts(self, values):
        domain = values["deploy_domain_name"]
        return [
            hosts_mod.Host(values["cluster_name"], spec, domain, self.dir / "hosts")
            for spec in plan.hosts(values)
        ]

    def _pattern(self, cluster):
        return net.cluster_pattern(cluster)

    # -- Backend -------------------------------------------------------------------

    def preflight(self, inputs, check_quota=True):
        values = inputs.values
        findings = []
        if os.geteuid() != 0:
            findings.append(
                Finding("local", False, "the local cloud needs root (namespaces, mounts, nspawn)",
                        "run kos as root (sudo)")
            )
        tools = ["systemd-nspawn", "nsenter", "ip", "mount", "ssh-keygen"]
        try:
            image, mirror, suite = rootfs.image_path()
            if not (image / rootfs.MARKER).exists():
                tools.append("debootstrap")
        except KosError as exc:
            findings.append(Finding("local image", False, exc.problem, exc.fix))
        missing = [t for t in tools if not shutil.which(t)]
        findings.append(
            Finding("local tools", not missing,
                    f"missing {', '.join(missing)}" if missing else "systemd-nspawn and tools found",
                    "apt-get install systemd-container debootstrap iproute2 util-linux" if missing else "")
        )
        try:
            specs = plan.hosts(values)
            findings.append(Finding("local plan", True, f"{len(specs)} hosts"))
        except InputError as exc:
            findings.append(Finding("first_control_plane_access", False, exc.problem, exc.fix))
            specs = []
        clashes = net.overlapping_routes(
            [values["public_cidr"], values["private_cidr"]], values["cluster_name"]
        )
        for cidr, route in clashes:
            field = "public_cidr" if cidr == values["public_cidr"] else "private_cidr"
            findings.append(
                Finding(field, False, f"{field} {cidr} overlaps a route of this machine: {route}",
                        f"choose another {field} for the local cloud (e.g. 10.240.0.0/24)")
            )
        if not clashes:
            findings.append(Finding("local networks", True, "public and private CIDRs are free here"))
        need = HOST_MEMORY_MB * len(specs)
        avail = _mem_available_mb()
        if specs:
            findings.append(
                Finding("local memory", avail is None or avail > need,
                        f"{len(specs)} hosts need about {need} MiB; {avail} MiB available",
                        "lower num_kube_nodes, or free memory")
            )
        findings += agent_findings(values["ssh_public_keys"])
        return findings

    def create(self, inputs, steps):
        values = inputs.values
        cluster = values["cluster_name"]
        self.state.ensure()
        fp = fingerprint(inputs.fingerprint, rootfs.RECIPE)
        image = steps.run(
            "local-image", fp, "the local cloud's Debian image",
            lambda: {"image": str(rootfs.ensure())},
        )["image"]
        if not (Path(image) / rootfs.MARKER).exists():
            image = str(rootfs.ensure())
        outputs = plan.outputs(values)
        gateway = plan.public_gateway(values)
        hosts = self._hosts(values)

        def networks():
            _raise_inotify()
            net.create_networks(cluster, values["public_cidr"], gateway)
            for i, h in enumerate(hosts):
                net.attach_host(cluster, i, h.spec, values["private_cidr"], values["public_cidr"], gateway)
            return {"namespaces": len(hosts) + 1}

        steps.run("local-networks", fp, "networks: public and private bridges, host namespaces",
                  networks, always=True)

        def machines():
            by_name = {h.spec.hostname: h for h in hosts}
            master_ip = by_name["salt"].spec.private_ip
            config_file, config = _master_config()
            master_files = {
                config_file: config,
                self.settings.pillar_file: outputs["salt_pillar"],
                str(Path(self.settings.pillar_file).parent / "_cloud.sls"): (
                    "# Written by kos for its local rehearsal cloud: what these hosts cannot do.\n"
                    + yaml.safe_dump(CLOUD_LAYER, sort_keys=True)
                ),
            }
            salt_env = {"KOS_STANDIN_DELAY": os.environ.get(JOIN_SECONDS_ENV, "0")}
            started = []
            for h in hosts:
                h.mount(image)
                h.provision(
                    user=values["deploy_user"],
                    keys=values["ssh_public_keys"],
                    master_ip=master_ip,
                    hosts={"salt": master_ip, "bastion": by_name["bastion"].spec.private_ip},
                    salt_env=salt_env,
                    master_files=master_files if h.spec.role == "salt_master" else None,
                )
                if h.start(net.host_ns(cluster, h.spec.hostname)):
                    started.append(h.spec.hostname)
            for h in hosts:
                h.wait_booted()
            self.dir.mkdir(parents=True, exist_ok=True)
            (self.dir / "outputs.json").write_text(json.dumps(outputs, indent=2, sort_keys=True))
            return {"started": started, "hosts": len(hosts)}

        steps.run("local-hosts", fp, f"boot {len(hosts)} hosts (systemd-nspawn)", machines, always=True)
        ui.info("the Kubernetes distribution on this cloud is simulated (test stand-ins)")
        return outputs

    def outputs(self):
        path = self.dir / "outputs.json"
        if not path.exists():
            return {}
        return json.loads(path.read_text())

    def plan(self, inputs, plan_file):
        outputs = plan.outputs(inputs.values)
        changes = [
            {"address": f"local.host[{m['hostname']!r}]", "actions": ["create"]}
            for m in outputs["minions"].values()
        ]
        text = "\n".join(
            f"+ host {m['hostname']:<16} {m['role']:<14} {m['private_ip']}"
            for m in outputs["minions"].values()
        )
        return changes, text + "\n"

    def destroy(self, inputs, steps):
        cluster = inputs.cluster_name
        fp = fingerprint(cluster)

        def teardown():
            machines = hosts_mod.nspawns(self._pattern(cluster))
            hosts_mod.stop(machines)
            mounts = hosts_mod.unmount_all(self.dir, self._pattern(cluster))
            removed = net.remove(cluster)
            hosts_mod.remove_disks(self.dir)
            # New hosts get new host keys on the same addresses.
            (self.state.path / "known_hosts").unlink(missing_ok=True)
            return {"machines": sorted(machines), "mounts": len(mounts), "removed": removed}

        steps.run("local-destroy", fp, "stop hosts, remove overlays, namespaces and links",
                  teardown, always=True)
        ui.ok(f"local cluster {cluster} destroyed")


def _raise_inotify():
    # Every host's systemd takes inotify instances; the default 128 stops nspawn at ~22 hosts.
    path = Path("/proc/sys/fs/inotify/max_user_instances")
    if int(path.read_text()) < INOTIFY_INSTANCES:
        subprocess.run(["sysctl", "-q", "-w", f"fs.inotify.max_user_instances={INOTIFY_INSTANCES}"],
                       check=False)


def _mem_available_mb():
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None
