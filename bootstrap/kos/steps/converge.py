"""
``kos converge``, and the end of ``kos up``: the steps that bring the salt master and the
minions to what this checkout and Terraform's outputs say, in the order they run. Each
recorded step is a member of ``ConvergeStep`` (steps.json's names, which the benchmarks
read), derived from ``STEPS``.
"""

import enum
import json
import re
from pathlib import Path

from .. import ccm
from ..errors import InputError
from ..salt import key_holders
from ..state import fingerprint
from . import runner
from .ccm_credential import ccm_credential, retire_ccm_credentials
from .deployment import pillar_of, salt_master_id
from .master import (
    accept_keys,
    accept_syndics,
    check_answering,
    configure_master,
    orchestrated,
    push_pillar_layers,
    push_trees,
)
from .nodes import rebuilt_minions, retired_minions


def select_targets(expected, exclude=(), limit=()):
    """The minions a converge works on: ``limit`` (default all), less ``exclude``."""
    for option, ids in (("--exclude", exclude), ("--limit", limit)):
        unknown = sorted(set(ids) - set(expected))
        if unknown:
            raise InputError(
                f"{option} {', '.join(unknown)}: not a minion of this cluster",
                fix=f"use minion ids from the outputs: {', '.join(expected)}",
            )
    targets = sorted((set(limit) or set(expected)) - set(exclude))
    if not targets:
        raise InputError(
            "--exclude/--limit leave no minion to converge",
            fix="exclude fewer minions, or limit to minions you do not exclude",
        )
    return targets



class ConvergeRun:
    """What the steps of one converge share."""

    def __init__(self, dep, outputs, targets, exclude=(), limit=(), always=True):
        self.dep = dep
        self.settings = dep.settings
        self.outputs = outputs
        self.pillar = pillar_of(outputs)
        self.expected = sorted(outputs["minions"])
        self.targets = targets
        self.exclude, self.limit = exclude, limit
        self.always = always
        self.fp = fingerprint(
            outputs, *([sorted(exclude), sorted(limit)] if exclude or limit else [])
        )
        self.syndics = self.pillar.get("kos", {}).get("salt_master", {}).get("syndics") or []
        self.master_id = salt_master_id(self.pillar)
        # set once connected (converge)
        self.master = None
        # The targets whose keys the master had accepted before this converge let the
        # others in (MembersAnswer).
        self.members = []
        self.steps = [step(self) for step in STEPS]

    def detail(self, kind):
        """What the step of class ``kind`` returned in this run (None: it did not run)."""
        return next(s.detail for s in self.steps if isinstance(s, kind))

    def accept(self, only):
        """Accept the keys of ``only``, the syndics' masters among the expected."""
        joining = self.detail(SyndicKeys) or {}
        return accept_keys(self.dep, self.master, self.expected, only,
                           syndics=joining.get("ids", ()))


class _OnMaster(runner.Step):
    """A converge step: done for the same outputs (and --exclude/--limit), it is skipped,
    unless the converge runs every step (``kos converge``; ``kos up`` with --replace)."""

    @property
    def always(self):
        return self.ctx.always

    def fingerprint(self):
        return self.ctx.fp


class SyndicKeys(_OnMaster):
    """A top master's: every converge (``always``), since an environment's syndic presents
    its key once that environment is up, whenever that is."""

    name = "salt-keys-syndics"
    always = True

    def should_run(self):
        return bool(self.ctx.syndics)

    def title(self):
        return (f"accept the keys of the syndics of {', '.join(self.ctx.syndics)} "
                "(this is a top master)")

    def run(self):
        return accept_syndics(self.ctx.dep, self.ctx.master, self.ctx.syndics)


class RetiredKeys(_OnMaster):
    """The nodes whose servers the last apply destroyed: their keys and mine data go, while
    the master holds any of them (its key list decides, not a record: a node retired,
    added again and retired again is forgotten twice)."""

    name = "salt-keys-retired"
    always = True

    def should_run(self):
        retired = retired_minions(self.ctx.dep)
        if not retired:
            self.retired = []
            return False
        self.retired = key_holders(self.ctx.master, retired)
        return bool(self.retired)

    def fingerprint(self):
        return fingerprint(self.retired)

    def title(self):
        return (f"forget the retired nodes {', '.join(self.retired)} "
                "(their keys and mine data)")

    def run(self):
        return self.ctx.master.delete_keys(self.retired)


class RebuiltKeys(_OnMaster):
    """Until their old keys go, the master denies the new servers' keys (their minions
    keep asking: rejected_retry); once per rebuild, so a re-run keeps what it accepted."""

    name = "salt-keys-rebuilt"
    always = False

    def should_run(self):
        self.rebuilt = rebuilt_minions(self.ctx.dep)
        return bool(self.rebuilt)

    def fingerprint(self):
        dep = self.ctx.dep
        return fingerprint(self.rebuilt, dep.steps.get(dep.backend.create_step).get("finished"))

    def title(self):
        return (f"forget the old keys of the rebuilt {', '.join(self.rebuilt)} (their new "
                "servers present new ones)")

    def run(self):
        return self.ctx.master.delete_keys(self.rebuilt)


class MasterKey(_OnMaster):
    """The master is configured before the other minions are let in: a configuration that
    changed restarts it, and with every minion connected each one would authenticate again
    while the master cannot publish (bench/converge.py's fresh converge shows the cost).
    Its own minion is all it needs."""

    name = "salt-keys-master"

    def should_run(self):
        return self.ctx.master_id in self.ctx.targets

    def title(self):
        return f"accept the key of the salt master's own minion {self.ctx.master_id}"

    def run(self):
        return self.ctx.accept([self.ctx.master_id])


class MembersAnswer(runner.Step):
    """Nothing changes unless every minion already in answers (a node down stops the run
    here); those whose keys are still pending answer once accepted (NewcomersAnswer)."""

    def should_run(self):
        ctx = self.ctx
        ctx.members = sorted(set(ctx.targets) & set(ctx.master.keys()["minions"]))
        return bool(ctx.members)

    def title(self):
        return f"check that {len(self.ctx.members)} minions answer"

    def run(self):
        ctx = self.ctx
        return check_answering(ctx.master, ctx.members,
                               (ctx.detail(MasterKey) or {}).get("accepted"),
                               ctx.settings.wait_minions)


class Trees(_OnMaster):
    name = "salt-trees"

    def fingerprint(self):
        settings = self.ctx.settings
        return fingerprint(self.ctx.fp, str(settings.formula_dir), str(settings.pillar_dir))

    def title(self):
        settings = self.ctx.settings
        return (f"push the formula to {settings.state_tree} and the pillar to "
                f"{Path(settings.pillar_file).parent}")

    def run(self):
        return push_trees(self.ctx.master, self.ctx.settings)


class Pillar(_OnMaster):
    name = "salt-pillar"

    def title(self):
        return f"push the Terraform pillar to {self.ctx.settings.pillar_file}"

    def run(self):
        return push_pillar_layers(self.ctx.master, self.ctx.dep, self.ctx.outputs)


class MasterConfig(_OnMaster):
    """No sync here: the orchestration syncs the minions whose modules may be stale
    (kos.converge_need), so kos converge and salt-run orch.deploy do the same."""

    name = "salt-master-config"

    def title(self):
        return "the salt master's own configuration, before any orchestration"

    def run(self):
        return configure_master(self.ctx.master, self.ctx.pillar, self.ctx.members)


class Keys(_OnMaster):
    name = "salt-keys"

    def title(self):
        return f"accept the keys of {len(self.ctx.targets)} minions"

    def run(self):
        return self.ctx.accept(self.ctx.targets)


class NewcomersAnswer(runner.Step):
    """The targets whose keys were just accepted answer before anything changes on them."""

    def should_run(self):
        self.newcomers = sorted(set(self.ctx.targets) - set(self.ctx.members))
        return bool(self.newcomers)

    def title(self):
        return f"check that {len(self.newcomers)} minions answer"

    def run(self):
        ctx = self.ctx
        return check_answering(ctx.master, self.newcomers, (ctx.detail(Keys) or {}).get("accepted"),
                               ctx.settings.wait_minions)


class CcmCredential(_OnMaster):
    name = "ccm-credential"

    def title(self):
        return "the cloud-controller-manager's application credential, for the control planes"

    def run(self):
        return ccm_credential(self.ctx.master, self.ctx.dep, self.ctx.outputs)


class Orchestrate(_OnMaster):
    """The orchestration's side of --exclude/--limit (orch.deploy reads these pillar keys)."""

    name = "orchestrate"

    def pillar(self):
        return {"exclude": sorted(self.ctx.exclude), "limit": sorted(self.ctx.limit)}

    def title(self):
        narrowed = self.ctx.exclude or self.ctx.limit
        return "salt-run state.orchestrate orch.deploy" + (
            f" pillar='{json.dumps(self.pillar())}'" if narrowed else "")

    def run(self):
        return orchestrated(self.ctx.master.orchestrate("orch.deploy", self.pillar()))


class CcmCredentialRetire(_OnMaster):
    name = "ccm-credential-retire"

    def title(self):
        return "delete the cloud-controller-manager's credentials no control plane uses"

    def run(self):
        return retire_ccm_credentials(self.ctx.master, self.ctx.dep, self.ctx.outputs)


# In the order they run.
STEPS = (
    SyndicKeys, RetiredKeys, RebuiltKeys, MasterKey, MembersAnswer, Trees, Pillar,
    MasterConfig, Keys, NewcomersAnswer, CcmCredential, Orchestrate, CcmCredentialRetire,
)


def _constant(class_name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", class_name).upper()


# The recorded steps of a converge, in the order they run, each recorded under its value
# in steps.json (MasterKey: MASTER_KEY = "salt-keys-master"); converge records no other.
ConvergeStep = enum.StrEnum(
    "ConvergeStep", [(_constant(step.__name__), step.name) for step in STEPS if step.name]
)


def converge(dep, always=True, exclude=(), limit=()):
    """The master's own minion, trees, pillar, the master's configuration, the other keys,
    orchestration; every step recorded, and re-run by kos converge."""
    outputs = dep.require_outputs()
    ccm.refuse_repository_credentials(dep.settings.pillar_dir)
    targets = select_targets(sorted(outputs["minions"]), exclude, limit)
    run = ConvergeRun(dep, outputs, targets, exclude, limit, always)
    with dep.master() as master:
        run.master = master
        runner.run(dep.steps, run.steps)
    return outputs
