"""The control planes' certificates: what ``kos status`` shows of them, and
``kos renew-certificates`` (orch.certificates)."""

from .. import ui
from .deployment import control_plane_ids
from .master import STATUS_PING, orchestrated, push_states


def certificate_summary(found):
    """What ``kos status`` shows of a control plane's ``kos.certificates``."""
    return {"days_left": found.get("days_left"), "warn_days": found.get("warn_days"),
            "expiring": sorted(found.get("expiring") or {})}



def renewed_on(summary, control_planes):
    """The control planes whose certificates orch.certificates renewed (its step on each
    changed something there)."""
    found = []
    for step in summary.get("steps", []):
        for minion, ran in (step.get("minions") or {}).items():
            if (step.get("id") == f"kos-orch-certificates-{minion}" and minion in control_planes
                    and ran.get("changed")):
                found.append(minion)
    return sorted(set(found))


def renew_certificates(dep, force=False):
    """orch.certificates: the control planes' certificates renewed one node at a time where
    they expire within kos:certificates:warn_days (all of them with ``force``); returns
    what each control plane has left afterwards."""
    outputs = dep.require_outputs()
    control_planes = control_plane_ids(outputs)
    pillar = {"force": True} if force else {}
    with dep.master() as master:
        # this checkout's formula (orch.certificates, the states); the pillar stays what
        # the last converge pushed
        push_states(master, dep.settings)
        with ui.step("renew the control planes' certificates, one at a time"):
            summary = master.orchestrate(
                "orch.certificates", pillar, rerun="kos renew-certificates"
                + (" --force" if force else ""))
        left = master.salt(control_planes, "kos.certificates", timeout=STATUS_PING)
    renewed = renewed_on(summary, control_planes)
    if renewed:
        ui.ok(f"certificates renewed on {', '.join(renewed)}")
    else:
        ui.ok("nothing due: no control plane's certificates expire within "
              "kos:certificates:warn_days (kos renew-certificates --force renews them anyway)")
    return {
        "renewed": renewed,
        "orchestration": orchestrated(summary),
        "certificates": {m: certificate_summary(v) for m, v in sorted(left.items())
                         if isinstance(v, dict)},
    }

