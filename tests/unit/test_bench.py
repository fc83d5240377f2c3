"""The converge benchmark's parts that run without a cloud: CPU accounting from /proc, the
table, and a failed size that is recorded, torn down and followed by the next."""

import importlib.util
import json
import os
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "converge.py"
spec = importlib.util.spec_from_file_location("kos_bench_converge", BENCH)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_a_process_cpu_is_read_from_proc():
    before = bench._proc_times(os.getpid())
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    spent = (bench._proc_times(os.getpid()) - before) / bench.CLK_TCK
    assert 0.2 < spent < 2, spent
    assert bench._proc_times(2**22 + 1) is None


def test_cpu_delta_splits_the_master_from_the_nodes():
    before = {"a": {"seconds": 10.0, "master": True}, "b": {"seconds": 5.0, "master": False}}
    after = {"a": {"seconds": 40.0, "master": True}, "b": {"seconds": 9.0, "master": False},
             "c": {"seconds": 6.0, "master": False}}  # c is new: all of it counts
    assert bench.cpu_delta(before, after) == {"master": 30.0, "per_node": 5.0, "total": 40.0,
                                              "hosts": 3}


def test_no_cluster_has_no_hosts():
    assert bench.host_cpu("kos-bench-no-such-cluster") == {}


def test_a_failed_size_is_recorded_torn_down_and_the_next_runs(tmp_path, monkeypatch):
    runs = bench.Bench(tmp_path, 2.0, {})
    downs = []
    monkeypatch.setattr(runs, "down", lambda var_file: downs.append(Path(var_file).name))

    def create(var_file):
        if "bench-5." in str(var_file):
            raise RuntimeError("kos up failed: SaltClientError")

    monkeypatch.setattr(runs, "create", create)
    monkeypatch.setattr(runs, "measured", lambda row, name, var_file, action: row.update(
        {name: {"seconds": 1.0, "highstates": 0, "cpu": {"master": 1, "per_node": 1}}}))
    monkeypatch.setattr(runs, "converge_with", lambda *a: {"seconds": 1.0})
    failed = runs.one(5, "ssh-ed25519 AAAA test")
    assert failed["error"] == "RuntimeError: kos up failed: SaltClientError"
    assert downs == ["bench-5.tfvars.json", "bench-6.tfvars.json", "bench-5.tfvars.json"]
    monkeypatch.setattr(runs, "kos", lambda *a, **kw: None)
    monkeypatch.setattr(runs, "converge_seconds", lambda: 1.0)
    later = runs.one(25, "ssh-ed25519 AAAA test")
    assert "error" not in later and later["batch1"]["seconds"] == 1.0
    for row, join in ((failed, 2.0), (later, 2.0)):
        row["join_seconds"] = join
    text = bench.table([failed, later], markdown=True)
    assert "failed: RuntimeError: kos up failed" in text
    assert text.count("\n") == 3


@pytest.mark.parametrize("markdown", [False, True])
def test_the_table_has_every_column(markdown):
    row = {"workers": 5, "join_seconds": 30.0, **{
        s: {"seconds": 1.0, "highstates": 6, "cpu": {"master": 2.0, "per_node": 0.5}}
        for s in bench.STEPS}}
    text = bench.table([row], markdown=markdown)
    for word in ("fresh", "no-op", "pillar", "direct", "add one", "batch-1", "6/6/6/6",
                 "2.0/0.5"):
        assert word in text, word


def test_a_baseline_that_never_converged_says_so_and_gives_no_ratio(tmp_path, monkeypatch):
    runs = bench.Bench(tmp_path, 30.0, {}, steps=["batch1"])
    for name in ("down", "create", "kos"):
        monkeypatch.setattr(runs, name, lambda *a, **kw: None)
    monkeypatch.setattr(runs, "measured", lambda row, name, var_file, action: row.update(
        {name: {"seconds": 10.0 if name == "fresh" else 680.2, "clean": name == "fresh"}}))
    row = dict(runs.one(25, "ssh-ed25519 AAAA test"), join_seconds=30.0)
    assert row["batch1_vs_fresh"] is None
    assert "680.2 (never clean)" in bench.table([row])


def test_a_size_stopped_midway_keeps_what_it_measured(tmp_path, monkeypatch):
    """The bench is stopped (SIGINT) during the baseline: the fresh converge it measured
    before is saved, and the table shows it beside why the row is incomplete."""
    runs = bench.Bench(tmp_path, 30.0, {}, steps=["batch1"])
    saved = []
    runs.save = lambda: saved.append(json.loads(json.dumps(row)))
    for name in ("down", "create", "kos"):
        monkeypatch.setattr(runs, name, lambda *a, **kw: None)
    monkeypatch.setattr(runs, "fresh", lambda var_file: {"seconds": 412.5})
    monkeypatch.setattr(bench, "host_cpu", lambda cluster: {})
    monkeypatch.setattr(runs, "highstates", lambda var_file, since: 53)

    def baseline(var_file):
        raise KeyboardInterrupt

    monkeypatch.setattr(runs, "baseline", baseline)
    row = {"join_seconds": 30.0}
    with pytest.raises(KeyboardInterrupt):
        runs.one(50, "ssh-ed25519 AAAA test", row)
    assert saved and saved[-1]["fresh"]["seconds"] == 412.5
    row["error"] = "interrupted (SIGINT)"
    text = bench.table([row])
    assert "412.5" in text and "50 (then failed: interrupted (SIGINT))" in text
