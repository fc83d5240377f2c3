"""
Where a cluster's machines come from. A backend creates the infrastructure for the
evaluated inputs and answers with the same outputs ``terraform output -json`` gives
(``bastion_floating_ip``, ``salt_master_private_ip``, ``minions``, ``kubernetes_nodes``,
``api_floating_ip``, ``ssh_user``, ``salt_pillar``, ``cluster_name``); converge, status and
kubeconfig only ever see those outputs. ``openstack`` is Terraform on an OpenStack project;
``local`` rebuilds the same plan on this machine (``kos.local``).
"""

from . import ccm, cloud, trust, ui
from .backend import Backend
from .errors import InputError, PreflightError
from .local import LocalBackend
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
            findings += cloud.cloud_findings(conn, inputs.values, check_quota=check_quota)
        except PreflightError as exc:
            findings.append(cloud.Finding("credentials", False, exc.problem, exc.fix))
        findings += agent_findings(inputs["ssh_public_keys"])
        return findings

    def _fp(self, inputs):
        return fingerprint(inputs.fingerprint, self.terraform.config_fingerprint())

    def create(self, inputs, steps):
        self.state.ensure()
        fp = self._fp(inputs)
        steps.run(
            "terraform-init",
            fp,
            f"terraform init ({self.terraform.backend} state)",
            self.terraform.init,
            always=not self.terraform.initialized,
        )
        replace = [instance_address(inputs, h) for h in self.settings.replace]
        title = "terraform apply" + "".join(f" -replace={a}" for a in replace)
        # A replacement is an action, not a state: it runs whenever it is asked for.
        steps.run("terraform-apply", fp, title, lambda: self.terraform.apply(replace),
                  always=bool(replace))
        steps.run(
            "first-boot", fp, "every server's first boot (cloud-init, read from its console)",
            lambda: cloud.wait_first_boot(
                self.conn, inputs.cluster_name, record=trust.Consoles(self.state.path).update
            ),
            always=bool(replace),
        )
        return self.outputs()

    def read_consoles(self):
        """What every server's console printed about its keys (``kos.trust`` records)."""
        return cloud.read_consoles(self.conn, self.state.cluster)

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
        steps.run(
            "terraform-init",
            fp,
            f"terraform init ({self.terraform.backend} state)",
            self.terraform.init,
            always=not self.terraform.initialized,
        )
        steps.run(
            "cleanup-before-destroy",
            fp,
            "remove load balancers, volumes, floating IPs and ports Kubernetes left",
            lambda: cloud.cleanup_before_destroy(self.conn, cluster),
            always=True,
        )
        steps.run("terraform-destroy", fp, "terraform destroy", self.terraform.destroy, always=True)
        steps.run(
            "cleanup-after-destroy",
            fp,
            "remove what outlived terraform destroy",
            lambda: cloud.cleanup_after_destroy(self.conn, cluster),
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


BACKENDS = {"openstack": OpenStackBackend, "local": LocalBackend}


def instance_address(inputs, hostname):
    """The Terraform address of a host's server (for ``-replace``)."""
    cps, n = inputs["num_control_plane"], inputs["num_kube_nodes"]
    nodes = [f"k8s-cp-{i + 1}" for i in range(cps)] + [f"k8s-worker-{i + 1}" for i in range(n - cps)]
    if hostname == "bastion":
        return "module.bastion.openstack_compute_instance_v2.this"
    if hostname == "salt":
        return "module.salt_master.openstack_compute_instance_v2.this"
    if hostname in nodes:
        return f'module.nodes.openstack_compute_instance_v2.this["{hostname}"]'
    raise InputError(
        f"--replace {hostname}: the cluster has no such server",
        fix=f"name one of: bastion, salt, {', '.join(nodes)}",
    )


def missing_outputs(outputs):
    return [k for k in OUTPUT_KEYS if k not in outputs]
