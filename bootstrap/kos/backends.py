"""
Where a cluster's machines come from. A backend creates the infrastructure for the
evaluated inputs and answers with the same outputs ``terraform output -json`` gives
(``bastion_floating_ip``, ``salt_master_private_ip``, ``minions``, ``kubernetes_nodes``,
``api_floating_ip``, ``ssh_user``, ``salt_pillar``, ``cluster_name``); converge, status and
kubeconfig only ever see those outputs, and a cloud may add one: ``simulated``, the
distributions it runs as stand-ins rather than as Kubernetes (status says so, down drains
nothing there). ``openstack`` is Terraform on an OpenStack project; other clouds are
installed beside kos as entry points of the group ``kos.clouds`` (the rehearsal cloud,
``local``, is the package ``kos_local``).
"""

from importlib import metadata

from . import ccm, cloud, cloud_cleanup, plan, trust, ui
from .backend import Backend
from .errors import InputError, PreflightError, TerraformError
from .ssh import agent_findings
from .state import fingerprint
from .terraform import Terraform

OUTPUT_KEYS = (
    "bastion_floating_ip",
    "salt_master_private_ip",
    "minions",
    "kubernetes_nodes",
    "api_floating_ip",
    "ssh_user",
    "salt_pillar",
    "cluster_name",
)


class OpenStackBackend(Backend):
    name = "openstack"
    create_step = "terraform-apply"

    def __init__(self, settings, state):
        super().__init__(settings, state)
        self._conn = None
        self.terraform = Terraform(
            settings.terraform_dir, state.path / "terraform", settings.var_files
        )

    @property
    def conn(self):
        if self._conn is None:
            self._conn = cloud.connect(self.settings.os_cloud)
        return self._conn

    def project(self):
        return self.conn

    def preflight(self, inputs, check_quota=True):
        findings = []
        try:
            conn = self.conn
            findings.append(
                cloud.Finding(
                    "credentials", True, f"authenticated to project {conn.current_project_id}"
                )
            )
            findings += cloud.cloud_findings(conn, inputs.values, inputs.nodes,
                                             check_quota=check_quota)
        except PreflightError as exc:
            findings.append(cloud.Finding("credentials", False, exc.problem, exc.fix))
        findings += agent_findings(inputs["ssh_public_keys"])
        return findings

    def _fp(self, inputs):
        return fingerprint(inputs.fingerprint, self.terraform.config_fingerprint())

    def _init(self, steps, fp):
        steps.run(
            "terraform-init",
            fp,
            f"terraform init ({self.terraform.backend} state)",
            self.terraform.init,
            always=not self.terraform.initialized,
        )

    def create(self, inputs, steps, leaving=None):
        self.state.ensure()
        fp = self._fp(inputs)
        self._init(steps, fp)
        current = self.outputs()
        replace = [instance_address(current, h) for h in self.settings.replace]
        title = "terraform apply" + "".join(f" -replace={a}" for a in replace)
        # A replacement is an action, not a state: it runs whenever it is asked for.
        # A replacement goes straight to apply: a node retired in the same change would go
        # without leaving the cluster, so that waits for a kos up without --replace.
        if replace:
            refuse_retiring_while_replacing(inputs, current)
            # a rebuilt node joins again from nothing: the old one leaves the cluster first
            nodes = sorted(mid for mid, m in (current.get("minions") or {}).items()
                           if m.get("hostname") in self.settings.replace
                           and m.get("role") in ("control_plane", "worker"))
            if nodes and leaving is not None:
                leaving(nodes, replace=True)

        def apply():
            if not replace:
                return self._apply(leaving)
            return {**self.terraform.apply(replace), "replaced": sorted(self.settings.replace)}

        steps.run("terraform-apply", fp, title,
                  lambda: self._with_faults(apply, inputs.cluster_name), always=bool(replace))
        consoles = trust.Consoles(self.state.path)
        steps.run(
            "first-boot", fp, "every server's first boot (cloud-init, read from its console)",
            lambda: cloud.wait_first_boot(
                self.conn, inputs.cluster_name, record=consoles.update,
                booted=consoles.first_booted(),
            ),
            always=bool(replace),
        )
        return self.outputs()

    def _with_faults(self, apply, cluster):
        """A failed apply names why Nova put servers in ERROR (their fault), when it can."""
        try:
            return apply()
        except TerraformError as exc:
            try:
                faults = cloud.server_faults(self.conn, cluster)
            except Exception as err:  # noqa: BLE001 - the apply's own error matters more
                faults = [f"(the servers' faults could not be read: {err})"]
            exc.details += [f"Nova: {fault}" for fault in faults]
            raise

    def _apply(self, leaving):
        """Plan, let the nodes whose servers the plan destroys leave the cluster, then apply
        exactly that plan. A cluster without servers yet is applied as it comes."""
        current = (self.outputs() or {}).get("minions")
        if not current:
            return self.terraform.apply()
        # Terraform's plan file holds every variable's value: it does not stay in the state dir.
        plan_file = self.state.path / "terraform" / "up.tfplan"
        try:
            self.terraform.plan(out=plan_file)
            doc = self.terraform.show_plan(plan_file)
            plan.refuse_moving_nodes(doc)
            plan.refuse_switching_api_endpoint(doc, self.outputs())
            ids = {info.get("hostname"): mid for mid, info in current.items()}
            gone = sorted(ids[host] for host in plan.destroyed_nodes(doc) if host in ids)
            if gone and leaving is not None:
                leaving(gone)
            summary = self.terraform.apply_plan(plan_file)
        finally:
            plan_file.unlink(missing_ok=True)
        return {**summary, "retired": gone}

    def read_consoles(self):
        """What every server's console printed about its keys (``kos.trust`` records)."""
        return cloud.read_consoles(self.conn, self.state.cluster)

    def read_master_consoles(self, clusters):
        """Other clusters' salt masters and what their consoles printed (syndics)."""
        return cloud.read_master_consoles(self.conn, clusters)

    def plan(self, inputs, plan_file):
        self.state.ensure()
        self.terraform.init()
        changes = self.terraform.plan(out=plan_file)
        return changes, self.terraform.show_text(plan_file)

    def outputs(self):
        if not self.terraform.initialized:
            self.state.ensure()
            self.terraform.init()
        return self.terraform.outputs()

    def destroy(self, inputs, steps):
        self.state.ensure()
        fp = self._fp(inputs)
        cluster = inputs.cluster_name
        self._init(steps, fp)
        steps.run(
            "cleanup-before-destroy",
            fp,
            "remove load balancers, volumes, floating IPs and ports Kubernetes left",
            lambda: cloud_cleanup.cleanup_before_destroy(self.conn, cluster),
            always=True,
        )
        steps.run("terraform-destroy", fp, "terraform destroy", self.terraform.destroy, always=True)
        steps.run(
            "cleanup-after-destroy",
            fp,
            "remove what outlived terraform destroy",
            lambda: cloud_cleanup.cleanup_after_destroy(self.conn, cluster),
            always=True,
        )
        steps.run(
            "ccm-credential-delete",
            fp,
            "delete the cloud-controller-manager's application credential",
            lambda: {"deleted": ccm.delete(self.conn, cluster)},
            always=True,
        )
        ui.ok(f"cluster {cluster} destroyed")


# https://packaging.python.org/en/latest/specifications/entry-points/
CLOUDS_GROUP = "kos.clouds"


def clouds():
    """``{name: load}`` of the clouds kos can build on: the entry points of ``kos.clouds``
    (``load()`` gives the Backend class). Run from a checkout on PYTHONPATH (ci/lib.sh) no
    entry point is installed: the product's own cloud is there all the same."""
    found = {ep.name: ep.load for ep in metadata.entry_points(group=CLOUDS_GROUP)}
    found.setdefault("openstack", lambda: OpenStackBackend)
    return found


def for_cloud(settings, state):
    """The Backend of ``settings.cloud`` for the cluster whose state directory is ``state``."""
    installed = clouds()
    if settings.cloud not in installed:
        raise InputError(f"--cloud {settings.cloud}: no such cloud is installed",
                         fix=f"use one of: {', '.join(sorted(installed))}")
    return installed[settings.cloud]()(settings, state)


# The servers' resource addresses in terraform/: every role module builds its servers with
# terraform/modules/server, keyed by hostname (tests/unit checks them against the modules).
SERVER_ADDRESSES = {
    "bastion": 'module.bastion.module.server.openstack_compute_instance_v2.this["bastion"]',
    "salt": 'module.salt_master.module.server.openstack_compute_instance_v2.this["salt"]',
}
NODE_SERVER = "module.nodes.module.server.openstack_compute_instance_v2.this"


def instance_address(outputs, hostname):
    """The Terraform address of a host's server (for ``-replace``); the nodes are the ones
    Terraform's outputs name (a retired node has no server to replace)."""
    nodes = sorted(m["hostname"] for m in ((outputs or {}).get("minions") or {}).values()
                   if m.get("role") in ("control_plane", "worker"))
    if hostname in SERVER_ADDRESSES:
        return SERVER_ADDRESSES[hostname]
    if hostname in nodes:
        return f'{NODE_SERVER}["{hostname}"]'
    if not nodes:
        raise InputError(f"--replace {hostname}: the cluster has no servers yet",
                         fix="run kos up without --replace to create it")
    raise InputError(
        f"--replace {hostname}: the cluster has no such server",
        fix=f"name one of: bastion, salt, {', '.join(nodes)}",
    )


def refuse_retiring_while_replacing(inputs, outputs):
    running = {m.get("hostname") for m in ((outputs or {}).get("minions") or {}).values()
               if m.get("role") in ("control_plane", "worker")}
    retiring = sorted(running - set(inputs.nodes))
    if retiring:
        raise InputError(
            f"{', '.join(retiring)} still run but the inputs no longer list "
            f"{'it' if len(retiring) == 1 else 'them'}: --replace applies "
            "without letting them leave the cluster first",
            fix="run kos up without --replace first (they leave, then their servers go), "
            "then kos up --replace",
        )


def missing_outputs(outputs):
    return [k for k in OUTPUT_KEYS if k not in outputs]
