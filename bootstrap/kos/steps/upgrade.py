"""``kos upgrade``: every node moved to a Kubernetes version, one at a time (orch.upgrade)."""

from .. import ui
from .deployment import first_control_plane
from .master import orchestrated, push_trees
from ..distributions import kubernetes_members


def upgrade(dep, version=None):
    """orch.upgrade: every node moved to ``version`` (default: the pillar's), one at a
    time, each drained before and uncordoned after; returns each node's version after."""
    outputs = dep.require_outputs()
    first = first_control_plane(outputs)
    pillar = {"version": version} if version else {}
    rerun = "kos upgrade" + (f" --version {version}" if version else "")
    with dep.master() as master:
        # this checkout's formula and pillar: the target may be the pillar's new channel
        push_trees(master, dep.settings)
        with ui.step("upgrade the nodes, one at a time"):
            summary = master.orchestrate("orch.upgrade", pillar, rerun=rerun)
        _, members, problem = kubernetes_members(master, first)
    done = [s["id"][len("kos-orch-upgrade-"):-len("-done")] for s in summary.get("steps", [])
            if s["id"].startswith("kos-orch-upgrade-") and s["id"].endswith("-done")]
    return {
        "orchestration": orchestrated(summary),
        # in the order they were moved
        "upgraded": done,
        "versions": {name: node.get("version") for name, node in sorted(members.items())},
        **({"problem": problem} if problem else {}),
    }

