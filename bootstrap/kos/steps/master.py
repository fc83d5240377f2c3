"""
What kos does on the salt master for the steps: the formula and pillar pushed, the
master's own configuration applied, minion keys accepted against their consoles, the
minions' answers checked, an orchestration's record.
"""

from pathlib import Path

from .. import ui
from ..errors import ConvergeError
from ..refusal import check_pillar_yaml
from ..salt import failed_states, release_files
from .deployment import salt_master_id
from .hostkeys import console_reader, console_records

# Seconds a minion already in the cluster gets to answer before a converge stops.
ANSWER_GRACE = 30
# Seconds the reads of a running cluster (kos status, the day-two commands) wait for answers.
STATUS_PING = 10


def push_states(master, settings):
    """This checkout's formula to the master, with the release of the extension installed
    here, which the formula's kos.extension installs on every minion (the master's own
    included)."""
    return master.push_tree(settings.formula_dir, settings.state_tree, extra=release_files())


def push_trees(master, settings):
    """This checkout's formula and pillar to the master; a pillar file YAML cannot read
    stops it first."""
    check_pillar_yaml(settings.pillar_dir)
    return {
        "states": push_states(master, settings),
        # Layers a cloud writes (_from_terraform.sls, _cloud.sls) stay.
        "pillar": master.push_tree(
            settings.pillar_dir, str(Path(settings.pillar_file).parent), keep="_*.sls"
        ),
    }


def push_pillar_layers(master, dep, outputs):
    """The Terraform layer, and whatever layers the cloud writes (``_*.sls``)."""
    pillar_dir = Path(dep.settings.pillar_file).parent
    done = {"pillar": master.push_pillar(outputs["salt_pillar"], dep.settings.pillar_file)}
    for name, text in dep.backend.pillar_layers(outputs).items():
        done[name] = master.push_pillar(text, str(pillar_dir / name))
    return done



def configure_master(master, pillar, targets):
    """
    Apply the salt_master formula to the master before the orchestration: a changed
    configuration restarts the master (deferred by the formula, so the run that changed it
    can return), and a restart inside the orchestration would cut it off. After a restart,
    waits until ``targets`` (minions already accepted) answer again. Then a master whose
    request worker failed to start (a Salt race) is restarted before the orchestration.
    """
    master_id = salt_master_id(pillar)
    if not master_id:
        return {"skipped": "no salt master in the Terraform pillar"}
    ret = master.salt([master_id], "state.apply", "salt_master", timeout=120)
    if master_id not in ret:
        raise ConvergeError(
            f"the salt master's own minion {master_id} did not answer state.apply salt_master",
            fix="check salt-minion on the salt master (systemctl status salt-minion)",
        )
    result = ret[master_id]
    bad = failed_states(result)
    if bad:
        raise ConvergeError(
            f"configuring the salt master failed at {bad[0][0]}",
            fix="fix the salt_master pillar or formula and re-run kos converge",
            details=[f"{sid}: {comment}" for sid, comment in bad],
        )
    changed = sorted(
        state.get("__id__", key) for key, state in result.items()
        if isinstance(state, dict) and state.get("changes")
    )
    # The formula schedules a restart only where it manages the service (not under
    # a test master): wait only when that deferred restart was scheduled.
    if "salt_master-service-restart-deferred" in changed:
        ui.info("the salt master's configuration changed: waiting for its restart")
        master.wait_restarted()
        master.wait_responding(targets)
    restarts = master.mend_broken_workers(targets)
    return {"changed": changed, **({"restarted": restarts} if restarts else {})}



def accept_keys(dep, master, expected, only, syndics=()):
    """Accept the keys of ``only`` (of the ``expected`` minions) against what their
    consoles printed; what was accepted, unverified and pending unexpectedly."""
    result = master.wait_and_accept(
        expected,
        timeout=dep.settings.wait_minions,
        only=only,
        consoles=console_records(dep, only),
        trust_unverified=dep.settings.trust_unverified,
        syndics=syndics,
    )
    return {key: result[key] for key in ("accepted", "unverified", "unexpected_pending")}


def check_answering(master, targets, accepted, wait):
    """
    Before anything changes: every targeted minion answers, or the run stops naming the
    silent ones. Minions whose key was just accepted get ``wait`` seconds to connect; the
    others, already in the cluster, a short grace (a minion restarting). A master that
    cannot publish yet (just rebuilt or restarted: its minions all sign in again) is
    waited for up to ``wait`` seconds besides; that time is not the minions'.
    """
    res = master.silence(targets, wait if accepted else ANSWER_GRACE, master_timeout=wait)
    if res.get("master_error"):
        raise ConvergeError(
            f"the salt master could not publish: {res['master_error']}; nothing was changed",
            fix="check salt-master on the master (journalctl -u salt-master, its load), "
            "then re-run the same kos command",
        )
    silent = res["silent"]
    if silent:
        raise ConvergeError(
            f"minions do not answer: {', '.join(silent)}; nothing was changed",
            fix="start salt-minion on them (systemctl status salt-minion; ports 4505/4506 to "
            "the master), or converge the others without them: kos converge "
            + " ".join(f"--exclude {m}" for m in silent),
        )
    return res["answering"]



def syndic_masters(dep, clusters):
    """
    The salt masters of the environments that join this top master as syndics:
    ``{cluster: (minion id, console record) or None}``, from the cloud's consoles; None for
    all where no cloud can be read.
    """
    reader = console_reader(dep, "read_master_consoles")
    return reader(clusters) if reader else dict.fromkeys(clusters)


def accept_syndics(dep, master, clusters):
    """A top master's step: accept the syndics of ``clusters`` whose masters are up."""
    result = master.accept_syndics(
        syndic_masters(dep, clusters), trust_unverified=dep.settings.trust_unverified
    )
    for cluster in result["waiting"]:
        ui.info(
            f"syndic {cluster}: not joined yet (its master is not up, or its salt-syndic has "
            f"not presented its key): run kos converge here again once {cluster} is up"
        )
    return result


def orchestrated(summary):
    """The orchestrate step's record: how many steps ran and each one's seconds (where the
    time of a converge goes, for an operator and the benchmark)."""
    steps = summary.get("steps", [])
    return {
        "steps": len(steps),
        "seconds": {
            s["id"]: round(s["duration"] / 1000, 1)
            for s in steps
            if isinstance(s.get("duration"), (int, float))
        },
    }
