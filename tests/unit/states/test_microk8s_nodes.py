"""Unit tests of the microk8s states a control plane runs on the cluster's nodes: drained,
removed, uncordoned, Ready on a version; test mode off and on."""

import types
from unittest.mock import call

import pytest
from salt.exceptions import CommandExecutionError

from tests.unit.states import microk8s_states as loader
from tests.unit.states.microk8s_states import STATES, expect_applied, without_the_snap

# the fixtures: the microk8s state modules on one loader
m, test_mode, state_dir = loader.m, loader.test_mode, loader.state_dir
configure_loader_modules = loader.configure_loader_modules

states = STATES["microk8s"]


NODE = "k8s-worker-1"


def nodes(ready=True, version="v1.31.9", unschedulable=False, name=NODE):
    """What microk8s.nodes says of one node (and of a control plane next to it)."""
    return {"k8s-cp-1": {"ready": True, "role": "control-plane", "ip": "10.1.0.11",
                         "version": "v1.31.9", "unschedulable": False},
            name: {"ready": ready, "role": "worker", "ip": "10.1.0.21", "version": version,
                   "unschedulable": unschedulable}}


def expect_node_action(m, ret, test_mode, done, function, **kwargs):
    """The comment says what was (or would be) done to NODE; the module function ran only
    outside test mode."""
    if test_mode:
        assert ret["comment"] == f"node {NODE} would be {done}"
        m[function].assert_not_called()
    else:
        assert ret["comment"] == f"node {NODE} {done}"
        m[function].assert_called_once_with(NODE, **kwargs)


# kubectl's exit-1 texts as microk8s.drain raises them: a Pod without a controller
# (pkg/drain/filters.go) and an eviction a PodDisruptionBudget holds until --timeout
# (pkg/drain/drain.go), each reported by pkg/cmd/drain/drain.go, in
# https://github.com/kubernetes/kubectl/tree/v0.31.0
DRAIN_REFUSED = (
    f'error: unable to drain node "{NODE}" due to error: cannot delete cannot delete Pods that '
    "declare no controller (use --force to override): default/zingaboom, continuing command...\n"
    f"There are pending nodes to be drained:\n {NODE}\ncannot delete cannot delete Pods that "
    "declare no controller (use --force to override): default/zingaboom\n"
    f"node/{NODE} cordoned")


DRAIN_TIMED_OUT = (
    f'error: unable to drain node "{NODE}" due to error: error when evicting pods/"redis-1" -n '
    '"default": global timeout reached: 5m0s, continuing command...\n'
    f"There are pending nodes to be drained:\n {NODE}\n"
    'error when evicting pods/"redis-1" -n "default": global timeout reached: 5m0s')


CONNECTION_REFUSED = ("The connection to the server 127.0.0.1:16443 was refused - did you "
                      "specify the right host or port?")


def test_node_drained(m, test_mode):
    m["microk8s.nodes"].side_effect = [nodes(), nodes(unschedulable=True)]
    ret = states.node_drained(NODE, timeout=300)
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"schedulable": {"old": True, "new": False}}
    expect_node_action(m, ret, test_mode, "drained", "microk8s.drain", timeout=300)
    # Looked again afterwards, unless only testing.
    assert m["microk8s.nodes"].call_count == (1 if test_mode else 2)


def test_node_drained_without_timeout_passes_none(m):
    m["microk8s.nodes"].side_effect = [nodes(), nodes(unschedulable=True)]
    assert states.node_drained(NODE)["result"] is True
    m["microk8s.drain"].assert_called_once_with(NODE, timeout=None)


def test_a_cordoned_node_is_drained_again(m, test_mode):
    """An earlier drain that timed out left it cordoned, maybe with Pods still on it."""
    m["microk8s.nodes"].return_value = nodes(unschedulable=True)
    ret = states.node_drained(NODE, timeout=300)
    assert ret["result"] is True and ret["changes"] == {}, ret
    expect_node_action(m, ret, test_mode, "drained", "microk8s.drain", timeout=300)


@pytest.mark.parametrize("text", [DRAIN_REFUSED, DRAIN_TIMED_OUT], ids=["refused", "timed-out"])
def test_node_drained_reports_kubectls_failure(m, test_mode, text):
    m["microk8s.nodes"].return_value = nodes()
    m["microk8s.drain"].side_effect = CommandExecutionError(text)
    ret = states.node_drained(NODE, timeout=300)
    if test_mode:
        assert ret["result"] is None and ret["changes"]
        m["microk8s.drain"].assert_not_called()
    else:
        assert ret["result"] is False and ret["changes"] == {}, ret
        assert ret["comment"] == f"draining {NODE} failed: {text}"


@pytest.mark.parametrize(("state", "cordoned", "verb", "still"), [
    ("node_drained", False, "drain", "schedulable"),
    ("node_uncordoned", True, "uncordon", "cordoned"),
])
def test_a_node_that_stays_as_it_was_fails(m, test_mode, state, cordoned, verb, still):
    """`kubectl uncordon` exits 0 even when its patch fails: RunCordonOrUncordon prints the
    error and returns nil,
    https://github.com/kubernetes/kubectl/blob/v0.31.0/pkg/cmd/drain/drain.go."""
    m["microk8s.nodes"].return_value = nodes(unschedulable=cordoned)
    m["microk8s.uncordon"].return_value = ""
    ret = getattr(states, state)(NODE)
    if test_mode:
        assert ret["result"] is None
    else:
        assert ret["result"] is False and ret["changes"] == {}
        assert ret["comment"] == f"kubectl {verb} {NODE} ran but the node is still {still}"
        m[f"microk8s.{verb}"].assert_called_once()


@pytest.mark.parametrize("state", ["node_drained", "node_uncordoned"])
def test_an_unregistered_node_fails_in_both_modes(m, test_mode, state):
    m["microk8s.nodes"].return_value = nodes(name="k8s-worker-2")
    ret = getattr(states, state)(NODE)
    assert ret["result"] is False and ret["changes"] == {}, ret
    assert f"node {NODE} is not registered in the cluster" in ret["comment"]
    m["microk8s.drain"].assert_not_called()
    m["microk8s.uncordon"].assert_not_called()


@pytest.mark.parametrize("state, verb", [("node_drained", "draining"),
                                         ("node_uncordoned", "uncordoning")])
def test_node_states_on_a_worker_fail(m, test_mode, state, verb):
    """microk8s.nodes refuses to answer on a worker: these states run on a control plane."""
    m["microk8s.nodes"].side_effect = CommandExecutionError(
        "this node is a worker: ask a control-plane node")
    ret = getattr(states, state)(NODE)
    assert ret["result"] is False and ret["changes"] == {}
    assert ret["comment"] == f"{verb} {NODE} failed: this node is a worker: ask a control-plane node"


def test_node_uncordoned(m, test_mode):
    m["microk8s.nodes"].side_effect = [nodes(unschedulable=True), nodes()]
    ret = states.node_uncordoned(NODE)
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"schedulable": {"old": False, "new": True}}
    expect_node_action(m, ret, test_mode, "uncordoned", "microk8s.uncordon")


def test_node_uncordoned_already(m, test_mode):
    m["microk8s.nodes"].return_value = nodes()
    ret = states.node_uncordoned(NODE)
    assert ret["result"] is True and ret["changes"] == {}
    assert ret["comment"] == f"node {NODE} is schedulable"
    m["microk8s.uncordon"].assert_not_called()


def test_node_uncordoned_reports_kubectls_failure(m, test_mode):
    m["microk8s.nodes"].return_value = nodes(unschedulable=True)
    m["microk8s.uncordon"].side_effect = CommandExecutionError(CONNECTION_REFUSED)
    ret = states.node_uncordoned(NODE)
    if test_mode:
        assert ret["result"] is None and ret["changes"]
        m["microk8s.uncordon"].assert_not_called()
    else:
        assert ret["result"] is False and ret["changes"] == {}
        assert ret["comment"] == f"uncordoning {NODE} failed: {CONNECTION_REFUSED}"


class Clock:
    """time.monotonic and time.sleep for node_ready: sleeping moves the clock."""

    def __init__(self):
        self.now = 1000.0
        self.slept = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(states, "time", types.SimpleNamespace(monotonic=clock.monotonic,
                                                              sleep=clock.sleep))
    return clock


def test_node_ready_waits_for_the_new_version(m, test_mode, clock):
    m["microk8s.nodes"].side_effect = [
        nodes(ready=False),                          # refreshing
        CommandExecutionError(CONNECTION_REFUSED),   # the API server restarts
        nodes(ready=True, version="v1.31.9"),        # Ready again, still the old kubelet
        nodes(ready=False, version="v1.32.3"),
        nodes(ready=True, version="v1.32.3"),
    ]
    ret = states.node_ready(NODE, track="1.32", timeout=60, interval=5)
    assert ret["result"] is True and ret["changes"] == {}, ret
    if test_mode:
        assert ret["comment"] == f"would wait for node {NODE} to be Ready on 1.32"
        m["microk8s.nodes"].assert_not_called()
        assert clock.slept == []
    else:
        assert ret["comment"] == f"node {NODE} is Ready on v1.32.3"
        assert m["microk8s.nodes"].call_args_list == [call()] * 5
        assert clock.slept == [5, 5, 5, 5]


def test_node_ready_at_once(m, clock):
    m["microk8s.nodes"].return_value = nodes(version="v1.32.3")
    ret = states.node_ready(NODE, track="1.32")
    assert ret["result"] is True and ret["comment"] == f"node {NODE} is Ready on v1.32.3"
    assert clock.slept == [] and m["microk8s.nodes"].call_count == 1


@pytest.mark.parametrize("seen, words", [
    (nodes(name="k8s-worker-2"), "is not registered"),
    (nodes(ready=False, version="v1.32.3"), "is NotReady on v1.32.3"),
    (nodes(version="v1.31.9"), "is Ready on v1.31.9"),
    (CommandExecutionError(CONNECTION_REFUSED), f"could not be read: {CONNECTION_REFUSED}"),
], ids=["unregistered", "not-ready", "old-version", "api-down"])
def test_node_ready_gives_up_after_the_timeout(m, test_mode, clock, seen, words):
    if isinstance(seen, Exception):
        m["microk8s.nodes"].side_effect = seen
    else:
        m["microk8s.nodes"].return_value = seen
    ret = states.node_ready(NODE, track="1.32", timeout=10, interval=2)
    if test_mode:
        assert ret["result"] is True and ret["changes"] == {}
        m["microk8s.nodes"].assert_not_called()
        return
    assert ret["result"] is False and ret["changes"] == {}, ret
    assert ret["comment"] == f"node {NODE} {words} after 10 s; expected Ready on 1.32"
    assert clock.slept == [2] * 5 and m["microk8s.nodes"].call_count == 6
    assert clock.now == 1010.0


def test_node_ready_with_timeout_zero_looks_once(m, clock):
    m["microk8s.nodes"].return_value = nodes(ready=False)
    ret = states.node_ready(NODE, track="1.32", timeout=0)
    assert ret["result"] is False and m["microk8s.nodes"].call_count == 1 and clock.slept == []


@pytest.mark.parametrize("version, track, ok", [
    ("v1.32.3", "1.32", True), ("v1.32.0", "1.32", True), ("v1.3.2", "1.32", False),
    ("v1.320.1", "1.32", False), ("v1.22.3-3+9ec7c40ec93c73", "1.22", True), (None, "1.32", False),
])
def test_node_ready_compares_the_track(m, clock, version, track, ok):
    m["microk8s.nodes"].return_value = nodes(version=version)
    ret = states.node_ready(NODE, track=track, timeout=0)
    assert ret["result"] is ok, ret


def test_node_ready_refuses_a_track_yaml_read_as_a_number(m, clock):
    m["microk8s.nodes"].return_value = nodes(version="v1.30.1")
    ret = states.node_ready(NODE, track=1.30, timeout=0)
    assert ret["result"] is False and "track must be a string" in ret["comment"]
    assert m["microk8s.nodes"].call_count == 0


def test_node_states_predict_without_the_snap(m):
    without_the_snap(m)
    states.__opts__["test"] = True
    drained = states.node_drained(NODE, timeout=300)
    uncordoned = states.node_uncordoned(NODE)
    ready = states.node_ready(NODE, track="1.32")
    assert drained["result"] is None and uncordoned["result"] is None and ready["result"] is None
    assert drained["changes"] == {"schedulable": {"old": True, "new": False}}
    assert uncordoned["changes"] == {"schedulable": {"old": False, "new": True}}
    assert ready["changes"] == {}
    assert drained["comment"] == f"would drain node {NODE} once microk8s is installed"
    assert uncordoned["comment"] == f"would uncordon node {NODE} once microk8s is installed"
    assert ready["comment"] == f"would see node {NODE} Ready on 1.32 once microk8s is installed"
    states.__opts__["test"] = False
    for ret in (states.node_drained(NODE), states.node_uncordoned(NODE),
                states.node_ready(NODE, track="1.32")):
        assert ret["result"] is False and ret["changes"] == {}, ret
        assert ret["comment"].startswith("cannot ")
        assert ret["comment"].endswith("the microk8s command is not installed")


def test_a_leaving_node_that_left_already_counts_as_drained(m, test_mode):
    """A removal that stopped after the node left runs again from the drain."""
    m["microk8s.nodes"].return_value = nodes(name="k8s-worker-2")
    ret = states.node_drained(NODE, timeout=60, absent_ok=True)
    assert ret["result"] is True and ret["changes"] == {}, ret
    assert ret["comment"] == f"node {NODE} is not registered in the cluster"
    m["microk8s.drain"].assert_not_called()


def test_node_removed(m, test_mode):
    m["microk8s.nodes"].side_effect = [nodes(ready=False), nodes(name="k8s-worker-2")]
    ret = states.node_removed(NODE)
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"member": {"old": True, "new": False}}
    expect_node_action(m, ret, test_mode, "removed from the cluster", "microk8s.remove_node",
                       force=False)


def test_node_removed_when_gone_changes_nothing(m, test_mode):
    m["microk8s.nodes"].return_value = nodes(name="k8s-worker-2")
    ret = states.node_removed(NODE, force=True)
    assert ret["result"] is True and ret["changes"] == {}
    assert ret["comment"] == f"node {NODE} is not in the cluster"
    m["microk8s.remove_node"].assert_not_called()


def test_node_removed_reports_microk8s_failure_and_a_node_that_stays(m):
    m["microk8s.nodes"].return_value = nodes()
    m["microk8s.remove_node"].side_effect = CommandExecutionError("Node k8s-worker-1 is still up")
    ret = states.node_removed(NODE)
    assert ret["result"] is False and ret["changes"] == {}
    assert ret["comment"] == f"removing node {NODE} failed: Node k8s-worker-1 is still up"
    m["microk8s.remove_node"].side_effect = None
    ret = states.node_removed(NODE, force=True)
    assert ret["result"] is False and ret["changes"] == {}
    assert ret["comment"] == f"microk8s remove-node {NODE} ran but the node is still listed"
    m["microk8s.remove_node"].assert_called_with(NODE, force=True)
