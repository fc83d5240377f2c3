"""
``kos down``: the Kubernetes nodes drained (best effort), the cloud's resources destroyed
by the backend, then what the state directory knew of the cluster forgotten.
"""

from .. import trust, ui
from ..state import fingerprint
from . import runner
from .kubeconfig import remove_kubeconfigs
from .nodes import drain


class Drain(runner.Step):
    name = "drain"
    always = True

    def fingerprint(self):
        return fingerprint(self.ctx.cluster)

    def title(self):
        return "drain and delete Kubernetes nodes (best effort)"

    def run(self):
        return drain(self.ctx)


class Destroy(runner.Step):
    """The backend records its own steps (terraform destroy, the leak check). Once the
    servers are gone the kubeconfigs kos wrote go too (while they stand, the kubeconfigs
    are the way in), even when a leak found afterwards fails the run."""

    def run(self):
        dep = self.ctx
        dep.backend.destroy(dep.inputs, dep.steps)
        self.remove_kubeconfigs()

    def clean_up(self):
        if self.ctx.steps.status("terraform-destroy") == "done":
            self.remove_kubeconfigs()

    def remove_kubeconfigs(self):
        for path in remove_kubeconfigs(self.ctx):
            ui.ok(f"admin kubeconfig {path} removed")


class ForgetCluster(runner.Step):
    def run(self):
        dep = self.ctx
        # The next servers print keys of their own.
        trust.Consoles(dep.state.path).path.unlink(missing_ok=True)
        dep.steps.forget(*[name for name in list(dep.steps.records)
                           if name != "terraform-destroy"])


STEPS = (Drain, Destroy, ForgetCluster)


def down(dep, confirm):
    confirm(f"destroy cluster {dep.cluster} and everything it left in the project")
    runner.run(dep.steps, [step(dep) for step in STEPS])
