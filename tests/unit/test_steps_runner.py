"""
The step runner (``kos.steps.runner``), as k0sctl's phase manager runs phases
(https://github.com/k0sproject/k0sctl/blob/main/phase/manager.go), over the real step
records of a state directory: a re-run after a failure resumes at the step that failed,
repeats nothing done for the same inputs, and the steps that ran clean up after a failure.
"""

import json

import pytest
from kos.errors import ConvergeError
from kos.state import StateDir
from kos.steps import runner


class Recorded(runner.Step):
    """A named step that notes its runs and clean-ups in ``ctx`` (a list)."""

    def __init__(self, ctx, name, fp="fp", always=False, fails=False, wanted=True):
        super().__init__(ctx)
        self.name, self.fp, self.always, self.fails, self.wanted = name, fp, always, fails, wanted

    def should_run(self):
        return self.wanted

    def fingerprint(self):
        return self.fp

    def title(self):
        return f"step {self.name}"

    def run(self):
        self.ctx.append(("run", self.name))
        if self.fails:
            raise ConvergeError(f"{self.name} broke")
        return {"by": self.name}

    def clean_up(self):
        self.ctx.append(("clean_up", self.name))


class Check(runner.Step):
    """A step without a record of its own."""

    def title(self):
        return "check"

    def run(self):
        self.ctx.append(("run", "check"))
        return {"checked": True}


@pytest.fixture
def state(tmp_path):
    return StateDir(tmp_path, "kosu")


def records_on_disk(state):
    return json.loads((state.path / "steps.json").read_text())["steps"]


def test_a_rerun_after_a_failure_resumes_at_the_step_that_failed(state):
    done = []
    with pytest.raises(ConvergeError):
        runner.run(state.steps(), [Recorded(done, "a"), Recorded(done, "b", fails=True),
                                   Recorded(done, "c")])
    assert done == [("run", "a"), ("run", "b"), ("clean_up", "b"), ("clean_up", "a")]
    on_disk = records_on_disk(state)
    assert on_disk["a"]["status"] == "done" and on_disk["b"]["status"] == "failed"
    assert on_disk["b"]["error"] == "b broke" and "c" not in on_disk

    again = []
    a, b, c = Recorded(again, "a"), Recorded(again, "b"), Recorded(again, "c")
    ran = runner.run(state.steps(), [a, b, c])
    # a is done for the same fingerprint: skipped, its recorded detail read back
    assert again == [("run", "b"), ("run", "c")]
    assert ran == [a, b, c] and a.detail == {"by": "a"}
    assert {name: r["status"] for name, r in records_on_disk(state).items()} == dict.fromkeys(
        "abc", "done")


def test_new_inputs_or_always_run_a_step_again(state):
    runner.run(state.steps(), [Recorded([], "a"), Recorded([], "b")])
    again = []
    runner.run(state.steps(), [Recorded(again, "a", fp="other"), Recorded(again, "b", always=True)])
    assert again == [("run", "a"), ("run", "b")]
    assert records_on_disk(state)["a"]["fingerprint"] == "other"


def test_a_step_that_should_not_run_leaves_no_record_and_no_clean_up(state):
    done = []
    with pytest.raises(ConvergeError):
        runner.run(state.steps(), [Recorded(done, "skip", wanted=False), Check(done),
                                   Recorded(done, "b", fails=True)])
    assert done == [("run", "check"), ("run", "b"), ("clean_up", "b")]
    assert set(records_on_disk(state)) == {"b"}


def test_an_unnamed_step_runs_every_time_unrecorded(state):
    first, second = Check([]), Check([])
    runner.run(state.steps(), [first])
    runner.run(state.steps(), [second])
    assert second.detail == {"checked": True} and second.ctx == [("run", "check")]
    assert not (state.path / "steps.json").exists()


def test_a_quiet_failure_leaves_nothing_on_disk(state):
    step = Recorded([], "preflight", fails=True)
    step.quiet_failure = True
    with pytest.raises(ConvergeError):
        runner.run(state.steps(), [step])
    assert not state.path.exists()
