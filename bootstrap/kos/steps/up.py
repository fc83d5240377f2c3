"""
``kos up``: preflight, the servers created (or changed) by the cloud's backend, the old
host keys of rebuilt servers forgotten, then the converge. Re-run after a failure, it
picks up where it stopped: the backend records its own steps, the converge its.
"""

import os

from ..cloud import raise_on_failures
from ..state import fingerprint
from . import runner
from .converge import converge
from .hostkeys import forget_host_keys
from .nodes import refuse_replacing_the_only_control_plane, remove_nodes


def preflight(dep, check_quota=True, report=None):
    findings = dep.backend.preflight(dep.inputs, check_quota=check_quota)
    if report:
        report(findings)
    raise_on_failures(findings)
    return {"checks": len(findings)}


class Preflight(runner.Step):
    """A preflight that rejects the inputs changes nothing, locally included."""

    name = "preflight"
    quiet_failure = True

    def fingerprint(self):
        dep = self.ctx
        # OS_CLOUD picks the clouds.yaml entry as --os-cloud does: another cloud is checked anew
        return fingerprint(dep.inputs.fingerprint, dep.settings.cloud, dep.settings.os_cloud,
                           os.environ.get("OS_CLOUD"))

    def title(self):
        return "preflight"

    def run(self):
        dep = self.ctx
        # Once apply has begun, the project's usage includes this cluster: quotas are moot.
        apply_started = dep.steps.status(dep.backend.create_step) is not None
        return preflight(dep, check_quota=not apply_started)


class CreateServers(runner.Step):
    """The cloud's backend records its own steps (terraform init, apply, ...); the nodes it
    is about to destroy leave the cluster first (``nodes.remove_nodes``)."""

    def run(self):
        dep = self.ctx
        dep.use_outputs(dep.backend.create(
            dep.inputs, dep.steps,
            leaving=lambda minions, replace=False: remove_nodes(dep, minions, replace)))


class ForgetRebuiltHostKeys(runner.Step):
    def run(self):
        forget_host_keys(self.ctx, self.ctx.settings.replace)


class ConvergeCluster(runner.Step):
    """A rebuilt server needs everything converge does again (keys, trees, states)."""

    def run(self):
        return converge(self.ctx, always=bool(self.ctx.settings.replace))


STEPS = (Preflight, CreateServers, ForgetRebuiltHostKeys, ConvergeCluster)


def up(dep, confirm):
    """The cluster created or changed to the inputs and converged; its outputs."""
    if dep.steps.status(dep.backend.create_step) != "done":
        confirm(
            f"create cluster {dep.cluster} with {dep.inputs.node_count} Kubernetes nodes"
            + ("" if dep.backend.name == "openstack" else f" on the {dep.backend.name} cloud")
        )
    if dep.settings.replace:
        refuse_replacing_the_only_control_plane(dep)
    ran = runner.run(dep.steps, [step(dep) for step in STEPS])
    return ran[-1].detail
