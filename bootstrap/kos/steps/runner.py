"""
What a step is and how a list of them runs, as k0sctl's manager runs its phases
(https://github.com/k0sproject/k0sctl/blob/main/phase/manager.go): in order, each asked
first whether it should run; after a failure, the steps that ran clean up, the last first.
A step with a ``name`` runs through ``state.Steps.run``: recorded in steps.json under that
name, skipped when already done for the same fingerprint unless ``always``.
"""

from .. import ui


class Step:
    """One step of a command. ``ctx`` is what the steps of one run share."""

    # Its record in steps.json; None: a step that leaves no record of its own (a check, or
    # a backend's work that records its own steps).
    name = None
    # Whether it runs even when recorded done for the same fingerprint.
    always = False
    # A failure leaves no record (see ``state.Steps.run``).
    quiet_failure = False

    def __init__(self, ctx):
        self.ctx = ctx
        # What the step returned (or, skipped, what it recorded last time).
        self.detail = None

    def should_run(self):
        return True

    def fingerprint(self):
        """The inputs it depends on: done for the same ones, it is skipped."""
        return None

    def title(self):
        """What the operator reads while it runs (None: nothing of its own)."""
        return None

    def run(self):
        raise NotImplementedError

    def clean_up(self):
        """After this step or a later one failed."""


def run(records, steps):
    """Run ``steps`` (``Step`` objects) in order, recording the named ones in ``records``
    (a ``state.Steps``); the steps that ran, in order."""
    ran = []
    try:
        for step in steps:
            if not step.should_run():
                continue
            ran.append(step)
            step.detail = _run_one(records, step)
    except BaseException:
        for step in reversed(ran):
            step.clean_up()
        raise
    return ran


def _run_one(records, step):
    title = step.title()
    if step.name:
        return records.run(step.name, step.fingerprint(), title, step.run,
                           always=step.always, quiet_failure=step.quiet_failure)
    if title is None:
        return step.run()
    with ui.step(title):
        return step.run()
