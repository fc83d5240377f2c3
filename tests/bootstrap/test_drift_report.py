"""
The drift report's rules, on the shapes Salt and sha256sum return (the end-to-end check is
test_converge.py): what counts as a hand edit under /srv, and which highstate results in test
mode count as drift.
"""

from kos import drift

SUM = {"a": "1" * 64, "b": "2" * 64}


def test_tree_differences():
    local = {"top.sls": SUM["a"], "environments/defaults.sls": SUM["a"]}
    remote = {
        "top.sls": SUM["a"],
        "environments/defaults.sls": SUM["b"],
        "environments/extra.sls": SUM["a"],
        ".kos-tree": SUM["b"],
        "_cloud.sls": SUM["a"],
        "_from_terraform.sls": SUM["b"],
    }
    entries = drift.compare_tree(
        local, remote, keep="_*.sls", expected_extra={"_from_terraform.sls": SUM["a"]}
    )
    assert entries == [
        {"path": "_from_terraform.sls", "change": "edited on the master"},
        {"path": "environments/defaults.sls", "change": "edited on the master"},
        {"path": "environments/extra.sls", "change": "not in the repository"},
    ]
    assert drift.compare_tree(local, {"top.sls": SUM["a"]}) == [
        {"path": "environments/defaults.sls", "change": "missing on the master"}
    ]


def test_cloud_layers_are_kept_only_at_the_pillar_root():
    entries = drift.compare_tree({}, {"minions/_notes.sls": SUM["a"]}, keep="_*.sls")
    assert entries == [{"path": "minions/_notes.sls", "change": "not in the repository"}]


def state(result, changes=None, comment="", sid="x", run=0):
    return {
        "result": result,
        "changes": changes or {},
        "comment": comment,
        "__id__": sid,
        "__run_num__": run,
    }


def test_highstate_results_that_count_as_drift():
    ret = {
        "m1": {
            "file_|-same_|-/etc/a_|-managed": state(True, sid="same", run=0),
            "file_|-hosts_|-/etc/hosts_|-blockreplace": state(
                None, {"diff": "..."}, "Changes would be made", sid="hosts", run=1
            ),
            "pkg_|-tools_|-tools_|-installed": state(
                False, comment="no such package", sid="tools", run=2
            ),
        },
        "m2": {"file_|-same_|-/etc/a_|-managed": state(True)},
        "m3": ["Rendering SLS 'base:core' failed: bad pillar"],
    }
    found = drift.highstate_changes(ret, ["m1", "m2", "m3", "m4"])
    assert sorted(found) == ["m1", "m3", "m4"]
    assert [(e["state"], e["function"], e["change"], e["changes"]) for e in found["m1"]] == [
        ("hosts", "file.blockreplace", "would change", ["diff"]),
        ("tools", "pkg.installed", "would fail", []),
    ]
    assert found["m3"][0]["change"] == "no state run"
    assert "Rendering SLS" in found["m3"][0]["comment"]
    assert found["m4"][0]["comment"] == "no answer"


def test_report_text():
    doc = {
        "cluster": "kos-dev",
        "drift": True,
        "trees": {
            "/srv/salt": [],
            "/srv/pillar": [{"path": "environments/dev.sls", "change": "edited on the master"}],
        },
        "keys": [{"minion": "k8s-worker-2.dev", "change": "key not accepted"}],
        "states": {
            "k8s-cp-1.dev": [
                {
                    "state": "hosts",
                    "function": "file.blockreplace",
                    "change": "would change",
                    "changes": ["diff"],
                    "comment": "Changes would be made",
                }
            ]
        },
    }
    text = drift.format_report(doc)
    assert text.splitlines()[:6] == [
        "cluster kos-dev: DRIFT",
        "/srv/pillar on the master differs from the repository:",
        "  environments/dev.sls: edited on the master",
        "key k8s-worker-2.dev: key not accepted",
        "k8s-cp-1.dev: state.highstate test=True: 1 state(s)",
        "  hosts (file.blockreplace): would change (diff): Changes would be made",
    ]
    assert "kos converge" in text
    assert drift.format_report({**doc, "drift": False, "trees": {}, "keys": [], "states": {}}) == (
        "cluster kos-dev: no drift"
    )
