"""
orch.deploy's plan, read through Salt's py renderer
(``salt['slsutil.renderer']('salt://orch/planner.py', default_renderer='py', inputs=...)``,
https://docs.saltproject.io/en/latest/ref/renderers/all/salt.renderers.py.html): the
renderer sets ``inputs`` as a global of this module and calls ``run``. The planner is the
extension's (the runner kos_plan.plan), imported in the orchestration's own process: no
runner job, so no privilege change to the orchestration's user (saltutil.runner would drop
to it, Salt #67716).
"""

from saltext.kos.runners import kos_plan


def run():
    return kos_plan.plan(**inputs)  # noqa: F821 - set by the py renderer
