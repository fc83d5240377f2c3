"""
What `make demo` prints once the cluster is up: the time per phase in the order the phases
ran, and commands an operator can paste (the venv's `kos`, the example's variables once).
"""

import calendar
import json
import shlex
import subprocess
import time
from pathlib import Path

from kos import demo, inputs, state

REPO = Path(__file__).resolve().parents[2]
# kos up's first steps and how long each takes; terraform-init with its providers cached
# ends within the second it started, so terraform-apply starts in that same second
UP_STEPS = (("preflight", 3), ("terraform-init", 0), ("terraform-apply", 79),
            ("salt-keys", 20), ("orchestrate", 60))


def test_phases_print_in_the_order_they_ran(tmp_path, monkeypatch):
    clock = {"now": 0}
    monkeypatch.setattr(state, "_now", lambda: f"2026-12-03T10:{clock['now'] // 60:02d}:"
                        f"{clock['now'] % 60:02d}Z")

    def takes(seconds):
        clock["now"] += seconds

    steps = state.StateDir(tmp_path, demo.CLUSTER).steps()
    for name, seconds in UP_STEPS:
        steps.run(name, "fp", name, lambda s=seconds: takes(s),
                  quiet_failure=name == "preflight")
    assert steps.get("terraform-init")["started"] == steps.get("terraform-apply")["started"]
    phases = [name for name, _ in demo._phases(steps.path)]
    assert phases == [name for name, _ in UP_STEPS]


def test_steps_within_one_second_print_in_the_order_they_ran(tmp_path):
    steps = state.StateDir(tmp_path, demo.CLUSTER).steps()
    # names whose sorted order (steps.json's) is not the order they run in
    order = ("terraform-init", "terraform-apply", "salt-keys", "orchestrate")
    for name in order:
        steps.run(name, "fp", name, lambda: time.sleep(0.005))
    assert [name for name, _ in demo._phases(steps.path)] == list(order)


def steps_file(tmp_path, records):
    """A steps.json as kos writes it (keys sorted)."""
    path = tmp_path / "steps.json"
    path.write_text(json.dumps({"format": 1, "steps": records}, sort_keys=True))
    return path


def test_phases_follow_the_recorded_times(tmp_path):
    records = {
        "terraform-apply": {"status": "done", "started": "2026-12-03T10:00:05Z",
                            "finished": "2026-12-03T10:01:24Z", "seconds": 79.0},
        "terraform-init": {"status": "done", "started": "2026-12-03T10:00:01Z",
                           "finished": "2026-12-03T10:00:05Z", "seconds": 4.0},
        "orchestrate": {"status": "failed", "started": "2026-12-03T10:02:00Z"},
    }
    path = steps_file(tmp_path, records)
    assert demo._phases(path) == [("terraform-init", 4.0), ("terraform-apply", 79.0)]


def hints(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    keys = tmp_path / "keys.tfvars.json"
    keys.write_text(json.dumps({"ssh_public_keys": ["ssh-ed25519 AAAAC3Nz kos-demo@local"]}))
    return demo._hints({"SSH_AUTH_SOCK": "/tmp/agent.sock"}, keys)


def test_try_it_uses_the_venvs_kos_and_the_example_variables_once(tmp_path, monkeypatch):
    lines = hints(tmp_path, monkeypatch)
    commands = [shlex.split(line) for line in lines if "--cloud local" in line]
    assert commands
    for argv in commands:
        assert argv[0].endswith("/kos") and not argv[0].startswith("/"), argv
        assert (REPO / argv[0]).is_file()
        assert argv.count("--var-file") == 1
        assert argv[argv.index("--var-file") + 1] == "examples/local.tfvars"
    run = subprocess.run([commands[0][0], "--help"], capture_output=True, text=True)
    assert run.returncode == 0 and "status" in run.stdout


def test_the_exported_key_is_a_variable_kos_reads(tmp_path, monkeypatch):
    lines = hints(tmp_path, monkeypatch)
    (export,) = [line for line in lines if "TF_VAR_ssh_public_keys=" in line]
    name, value = shlex.split(export.split("export ", 1)[1])[0].split("=", 1)
    monkeypatch.setenv(name, value)
    got = inputs.evaluate(REPO / "terraform", [REPO / "examples" / "local.tfvars"])
    assert got.values["ssh_public_keys"] == ["ssh-ed25519 AAAAC3Nz kos-demo@local"]
    assert got.values["cluster_name"] == demo.CLUSTER


def test_ssh_hints_use_the_config_kos_writes(tmp_path, monkeypatch):
    ssh = [shlex.split(line) for line in hints(tmp_path, monkeypatch) if "ssh -F" in line]
    assert [argv[1:4] for argv in ssh] == [["-F", ".kos/demo/ssh_config", "salt"],
                                            ["-F", ".kos/demo/ssh_config", "k8s-cp-1"]]


def test_what_the_run_installed_is_said_in_order_and_only_this_runs(tmp_path, monkeypatch):
    """make's lines from this run (an earlier run's are not repeated), then what kos built
    once for the machine, then the cloud; a run that found everything says so."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".kos").mkdir()
    (tmp_path / ".kos" / "installed.log").write_text(
        "100 .venv/: kos and its Python dependencies (pip)\n"
        "205 .venv/: kos and its Python dependencies (pip)\n"
        "207 Debian packages: haproxy debootstrap (apt-get)\n")
    steps = state.StateDir(tmp_path / ".kos", demo.CLUSTER).steps()
    steps.run("local-images", "fp", "images", lambda: {"built": ["the cloud's image"]})
    steps.run("local-cloud", "fp", "cloud", lambda: {"cloud": "local", "booted": True,
                                                     "api": "http://100.64.0.130:5000/v3"})
    said = demo._installed(200, steps.path)
    assert said[:2] == [".venv/: kos and its Python dependencies (pip)",
                        "Debian packages: haproxy debootstrap (apt-get)"]
    assert said[2] == "the cloud's image, cached under ~/.cache/kos"
    assert said[3].startswith("the rehearsal cloud (API http://100.64.0.130:5000/v3)")
    assert len(said) == 4
    # a second run on a cloud that runs: nothing from make, nothing built, nothing booted
    steps.run("local-images", "fp2", "images", lambda: {"built": []})
    steps.run("local-cloud", "fp2", "cloud", lambda: {"cloud": "local", "booted": False})
    assert demo._installed(300, steps.path) == []


def test_a_step_of_an_earlier_run_is_not_a_phase_of_this_one(tmp_path):
    records = {
        "terraform-destroy": {"status": "done", "started": "2026-12-03T09:50:01.100Z",
                              "finished": "2026-12-03T09:50:12.000Z", "seconds": 10.9},
        "terraform-apply": {"status": "done", "started": "2026-12-03T10:00:05.200Z",
                            "finished": "2026-12-03T10:01:24.000Z", "seconds": 78.8},
    }
    path = steps_file(tmp_path, records)
    began = calendar.timegm(time.strptime("2026-12-03T10:00:05", "%Y-%m-%dT%H:%M:%S"))
    assert demo._phases(path, since=began) == [("terraform-apply", 78.8)]
    assert [n for n, _ in demo._phases(path)] == ["terraform-destroy", "terraform-apply"]
