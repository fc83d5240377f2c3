"""One cluster as the steps see it: its settings, inputs, outputs, state directory, backend
and the SSH session to its salt master; and the cluster's lock around a run that changes it."""

import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .. import inputs as inputs_mod
from .. import ui
from ..backends import for_cloud, missing_outputs
from ..errors import ConvergeError, InputError
from ..salt import PILLAR_FILE, SaltMaster
from ..ssh import Ssh, agent_keys
from ..state import StateDir, holder
from .hostkeys import pin_host_keys

# The formula and pillar kos pushes to the master: this checkout's.
REPO = Path(__file__).resolve().parents[3]


@dataclass
class Settings:
    terraform_dir: Path
    state_root: Path
    var_files: list = field(default_factory=list)
    cloud: str = "openstack"
    os_cloud: str = None
    outputs_file: Path = None
    ssh_port: int = 22
    wait_minions: int = 900
    # How long SSH keeps trying a bastion or master that is still booting.
    connect_wait: int = 0
    pillar_file: str = PILLAR_FILE
    state_tree: str = "/srv/salt"
    formula_dir: Path = REPO / "salt" / "salt"
    pillar_dir: Path = REPO / "pillar"
    # Hostnames whose servers `kos up` rebuilds (terraform apply -replace).
    replace: tuple = ()
    # The environment (environments/<env>/) whose variables and state these are.
    env: str = None
    # Pinned host keys; they replace the state directory's known_hosts before SSH.
    known_hosts: Path = None
    # Accept minion keys and SSH host keys no console vouched for (trust on first use).
    trust_unverified: bool = False


class Deployment:
    """One cluster: its inputs, state directory and backend."""

    def __init__(self, settings, need_inputs=True):
        self.settings = settings
        self.inputs = None
        self._outputs = None
        if settings.outputs_file:
            self._outputs = load_outputs(settings.outputs_file)
            cluster = self._outputs["cluster_name"]
        if need_inputs or not settings.outputs_file:
            with ui.step("evaluate the deployment's Terraform variables"):
                self.inputs = inputs_mod.evaluate(settings.terraform_dir, settings.var_files)
            cluster = self.inputs.cluster_name
        self.state = StateDir(settings.state_root, cluster)
        self.steps = self.state.steps()
        self.backend = for_cloud(settings, self.state)
        # Who holds the cluster's lock, while this run changes it (see ``locked``).
        self.holder = None
        # The consoles were read afresh in this run (once is enough: see console_records).
        self.consoles_read = False

    @property
    def cluster(self):
        return self.state.cluster

    def project(self):
        """The cluster's OpenStack project (openstacksdk), or None: none behind an outputs
        file, nor on a cloud without one."""
        return None if self.settings.outputs_file else self.backend.project()

    def use_outputs(self, outputs):
        self._outputs = outputs

    def outputs(self):
        if self._outputs is None:
            self._outputs = self.backend.outputs()
        return self._outputs

    def require_outputs(self):
        outputs = self.outputs()
        if not outputs:
            raise ConvergeError(
                f"cluster {self.cluster} has no infrastructure yet (no Terraform outputs)",
                fix="run kos up first",
            )
        missing = missing_outputs(outputs)
        if missing:
            raise ConvergeError(
                f"the infrastructure's outputs lack {', '.join(missing)}",
                fix="re-run terraform apply (kos up) with this repository's terraform/",
            )
        return outputs

    @contextmanager
    def master(self):
        outputs = self.require_outputs()
        self.state.ensure()
        accept_new = pin_host_keys(self, outputs)
        ssh = Ssh(
            self.state.path,
            outputs["bastion_floating_ip"],
            outputs["salt_master_private_ip"],
            outputs["ssh_user"],
            port=self.settings.ssh_port,
            connect_wait=self.settings.connect_wait,
            accept_new=accept_new,
            nodes_accept_new=self.settings.trust_unverified,
            nodes=ssh_nodes(outputs),
        )
        master = SaltMaster(ssh)
        try:
            if self.holder:
                # The run that holds the local lock holds the master's for as long as it talks
                # to the master: another machine's kos cannot run beside it.
                master.lock(self.cluster, self.holder)
            yield master
        finally:
            try:
                master.close()
            finally:
                ssh.close()


def ssh_nodes(outputs):
    """``{hostname: private address}`` of the servers behind the bastion: the salt master and
    the Kubernetes nodes (the bastion is reached by its floating IP)."""
    return {info["hostname"]: info["private_ip"]
            for info in (outputs.get("minions") or {}).values()
            if info.get("hostname") and info.get("private_ip") and info.get("role") != "bastion"}


@contextmanager
def locked(dep):
    """
    The block is the only kos run changing ``dep``'s cluster: its lock in the state
    directory now, and on the salt master whenever the run connects to it. Every run that
    locks reaches the cluster over SSH with the agent's keys: an agent that holds none
    stops it here, before it holds the lock or changes anything.
    """
    agent_keys()
    who = holder()
    with dep.state.locked(who):
        dep.holder = who
        # What an earlier run recorded before this one held the lock.
        dep.steps = dep.state.steps()
        try:
            yield
        finally:
            dep.holder = None


def load_outputs(path):
    """A saved ``terraform output -json`` document (or a plain name -> value map)."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise InputError(
            f"cannot read outputs file {path}: {exc}",
            fix="save it with `terraform output -json > outputs.json`",
        ) from exc
    if all(isinstance(v, dict) and "value" in v for v in doc.values()):
        doc = {k: v["value"] for k, v in doc.items()}
    missing = missing_outputs(doc)
    if missing:
        raise InputError(
            f"outputs file {path} lacks {', '.join(missing)}",
            fix="save the outputs of this repository's terraform/ root module",
        )
    return doc


def pillar_of(outputs):
    return yaml.safe_load(outputs["salt_pillar"]) or {}


def first_control_plane(outputs):
    first = pillar_of(outputs).get("kos", {}).get("first_control_plane")
    if first:
        return first
    cps = sorted(
        k for k, v in outputs["kubernetes_nodes"].items() if v.get("role") == "control_plane"
    )
    if not cps:
        raise ConvergeError("the outputs list no control-plane node")
    return cps[0]


def salt_master_id(pillar):
    """The salt master's own minion id, as Terraform names it (None: no master)."""
    return ((pillar.get("kos") or {}).get("salt_master") or {}).get("id")


def control_plane_ids(outputs):
    """The control planes' minion ids, sorted (the ones that hold certificates)."""
    return sorted(m for m, i in outputs["minions"].items() if i.get("role") == "control_plane")

