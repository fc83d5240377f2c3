"""Unit tests of what a converge of a node needs (kos.converge_need, kos.record_converged,
the kos.converged state) and of the join credential a node reads (kos.join_info)."""

import copy
import json
from unittest.mock import create_autospec

import pytest
import salt.modules.config
import salt.modules.pillar
from salt.exceptions import CommandExecutionError

from tests.unit.conftest import SALT_TREE, load

mod = load("modules", "kos")
state = load("states", "kos")
microk8s = load("modules", "microk8s")
microk8s_certs = load("modules", "microk8s_certs")

ME = "k8s-worker-1.example.com"
PILLAR = {
    "kos": {
        "distribution": "microk8s",
        "domain": "example.com",
        "first_control_plane": "k8s-cp-1.example.com",
        "salt_master": {"id": "salt.example.com", "ip": "10.1.0.5"},
        "nodes": {
            "k8s-cp-1.example.com": {"role": "control_plane", "ip": "10.1.0.11"},
            ME: {"role": "worker", "ip": "10.1.0.21"},
            "k8s-worker-2.example.com": {"role": "worker", "ip": "10.1.0.22"},
        },
        "orchestration": {"batch": 10},
    },
    "core": {"locale": "C.UTF-8"},
    "mine_functions": {"kos_private_ips": []},
}


@pytest.fixture
def state_dir(tmp_path):
    return tmp_path / "state"


@pytest.fixture
def pillar():
    return copy.deepcopy(PILLAR)


@pytest.fixture
def m(state_dir, pillar):
    config = {"kos:state_dir": str(state_dir)}
    mocks = {
        "config.get": create_autospec(salt.modules.config.get,
                                      side_effect=lambda k, d="": config.get(k, d)),
        "pillar.items": create_autospec(salt.modules.pillar.items,
                                        side_effect=lambda **kw: copy.deepcopy(pillar)),
        "microk8s.status": create_autospec(microk8s.status, return_value={
            "running": None, "worker": True, "high_availability": {"nodes": []}}),
        "microk8s.is_clustered": create_autospec(microk8s.is_clustered, return_value=True),
        # the formulas' defaults.yaml, as the master's file server hands them over
        "cp.get_file_str": lambda path, saltenv="base": (
            SALT_TREE / path.removeprefix("salt://")).read_text(),
        "saltutil.refresh_pillar": create_autospec(lambda wait=False: True, return_value=True),
        # the mine as the master answers it: what the other nodes said (mine_said)
        "mine.get": create_autospec(lambda tgt, fun, tgt_type="glob": None, return_value={}),
        "mine.update": create_autospec(lambda clear=False, mine_functions=None: None,
                                       return_value=True),
        "config.merge": lambda key, default=None: copy.deepcopy(pillar.get(key, default)),
    }
    return mocks


@pytest.fixture
def configure_loader_modules(m, pillar):
    opts = {"id": ME, "test": False}
    return {
        mod: {"__salt__": m, "__opts__": opts, "__pillar__": pillar},
        state: {"__salt__": {"kos.record_converged": mod.record_converged,
                             "kos.validate_pillar": mod.validate_pillar,
                             "kos.kubernetes_state": mod.kubernetes_state,
                             **{k: m[k] for k in ("saltutil.refresh_pillar", "mine.get",
                                                  "mine.update", "config.merge")}},
                "__opts__": opts, "__pillar__": pillar},
    }


@pytest.fixture(autouse=True)
def running(monkeypatch):
    """What the state run did before (Salt hands it to state functions as __running__)."""
    done = {}
    monkeypatch.setattr(state, "__running__", done, raising=False)
    return done


def test_a_node_never_converged_needs_its_highstate(m):
    need = mod.converge_need(tree="t1")
    assert need["highstate"] == ["never converged by kos"]
    assert need["sync"] is True
    assert need["kubernetes"] == {"role": "worker", "first": False, "initialised": True,
                                  "joined": True, "fresh": False}
    # the pillar is compiled fresh and unmasked: a changed secret is a change
    m["pillar.items"].assert_called_once_with(unmask=True)


def test_a_converged_node_needs_nothing_until_its_inputs_change(pillar):
    assert mod.record_converged(tree="t1") is True
    assert mod.converge_need(tree="t1") == {
        "highstate": [], "learn": False, "members": mod._inputs(pillar)["members"],
        "sync": False, "kubernetes": mod._kubernetes(pillar), "problems": None}
    # another state tree: its modules too may have changed
    assert mod.converge_need(tree="t2")["highstate"] == ["the state tree changed"]
    assert mod.converge_need(tree="t2")["sync"] is True
    # orch.deploy's own settings are no input of a highstate
    pillar["kos"]["orchestration"]["batch"] = 20
    assert mod.converge_need(tree="t1")["highstate"] == []
    pillar["core"]["locale"] = "de_DE.UTF-8"
    pillar["kos"]["api"] = {"floating_ip": "203.0.113.10"}
    assert mod.converge_need(tree="t1")["highstate"] == ["pillar changed: core, kos:api"]
    # a pillar change alone leaves the modules as they were synced
    assert mod.converge_need(tree="t1")["sync"] is False


def test_another_worker_is_news_for_hosts_only(pillar):
    mod.record_converged(tree="t1")
    pillar["kos"]["nodes"]["k8s-worker-3.example.com"] = {"role": "worker", "ip": "10.1.0.23"}
    need = mod.converge_need(tree="t1")
    assert need["highstate"] == [] and need["learn"] is True
    # once /etc/hosts learned it (this node's last highstate managed none), nothing is left
    assert mod.learn_members(need["members"]) == ""
    assert mod.converge_need(tree="t1")["learn"] is False
    # another control plane is an input of every node (kubeadm's load balancer lists them)
    pillar["kos"]["nodes"]["k8s-cp-2.example.com"] = {"role": "control_plane", "ip": "10.1.0.12"}
    assert mod.converge_need(tree="t1")["highstate"] == ["pillar changed: kos:nodes"]


def test_a_pillar_change_is_judged_on_the_answers_own_compile(m, pillar, monkeypatch):
    """A node that takes part, with the modules of this tree, says what is wrong with the
    pillar it compiled: no refresh and no validation job before the wave."""
    pillar["kos"]["networks"] = {"public_cidr": "10.0.0.0/24", "private_cidr": "10.1.0.0/24",
                                 "pod_cidr": "10.244.0.0/16", "service_cidr": "10.96.0.0/12"}
    mod.record_converged(tree="t1")
    pillar["core"]["locale"] = "de_DE.UTF-8"
    need = mod.converge_need(tree="t1")
    assert need["highstate"] == ["pillar changed: core"] and need["problems"] == []
    pillar["core"]["hostnme"] = "x"
    problems = mod.converge_need(tree="t1")["problems"]
    assert len(problems) == 1 and "'core:hostnme'" in problems[0], problems
    # another tree: its schema may differ, judged after the sync instead
    assert mod.converge_need(tree="t2")["problems"] is None
    # the first control plane issues join credentials: judged though it needs nothing
    del pillar["core"]["hostnme"]
    mod.record_converged(tree="t1")
    assert mod.converge_need(tree="t1")["problems"] is None
    monkeypatch.setitem(mod.__opts__, "id", CP)
    mod.record_converged(tree="t1")
    need = mod.converge_need(tree="t1")
    assert need["highstate"] == [] and need["problems"] == []


def test_a_node_that_left_its_cluster_needs_its_highstate(m):
    mod.record_converged(tree="t1")
    m["microk8s.status"].return_value = {"running": True, "worker": False,
                                         "high_availability": {"nodes": [{}]}}
    m["microk8s.is_clustered"].return_value = False
    assert mod.converge_need(tree="t1")["highstate"] == ["not joined"]


def test_a_node_without_microk8s_has_not_joined(m):
    del m["microk8s.status"]
    k8s = mod.converge_need()["kubernetes"]
    assert k8s["joined"] is False and k8s["fresh"] is True


def test_a_stopped_node_keeps_its_cluster(m):
    """Stopped, microk8s is not initialised, but its datastore is there: not fresh, so the
    orchestration starts it rather than taking it for a rebuilt server."""
    m["microk8s.status"].return_value = {"running": False, "worker": False, "stopped": True,
                                         "high_availability": {"nodes": []}}
    k8s = mod.converge_need()["kubernetes"]
    assert (k8s["initialised"], k8s["fresh"]) == (False, False)


def test_a_stopped_control_plane_is_never_said_not_joined(m):
    """Its status lists no member, yet it may be one: the mine says it cannot tell, and the
    orchestration still converges it (its highstate starts it)."""
    m["microk8s.status"].return_value = {"running": False, "worker": False, "stopped": True,
                                         "high_availability": {"nodes": []}}
    m["microk8s.is_clustered"].return_value = False
    k8s = mod.kubernetes_state()
    assert k8s["joined"] is None and "microk8s start" in k8s["error"], k8s
    assert mod.converge_need(tree="t1")["highstate"][-1] == "not joined"


def test_a_kubeadm_first_control_plane_never_initialised_is_fresh(m, pillar, monkeypatch):
    pillar["kos"]["distribution"] = "kubeadm"
    m["kubeadm.init_status"] = create_autospec(lambda kube_dir=None: None,
                                               return_value={"initialized": False})
    monkeypatch.setitem(mod.__opts__, "id", CP)
    k8s = mod.converge_need()["kubernetes"]
    assert (k8s["first"], k8s["initialised"], k8s["fresh"]) == (True, False, True)
    m["kubeadm.init_status"].return_value = {"initialized": True}
    k8s = mod.converge_need()["kubernetes"]
    assert (k8s["initialised"], k8s["fresh"]) == (True, False)


def test_last_converged_is_the_nodes_own_record(m, monkeypatch):
    assert mod.last_converged() is None
    monkeypatch.setattr(mod.time, "time", lambda: 1795000000)
    mod.record_converged(tree="t1", by="reactor")
    assert mod.last_converged() == {"at": 1795000000, "tree": "t1", "by": "reactor"}
    # learning new members keeps when the node last converged, and who converged it
    mod.learn_members("m2")
    assert mod.last_converged() == {"at": 1795000000, "tree": "t1", "by": "reactor"}


def test_learning_members_needs_a_whole_converge_first(state_dir):
    assert mod.learn_members("m1") is None
    assert not (state_dir / mod.CONVERGED_RECORD).exists()


@pytest.mark.parametrize("ran, noted", [
    ({"a": {"result": True}, "b": {"result": True}}, True),
    ({"a": {"result": True}, "b": {"result": False}}, False),
])
def test_the_converged_state_notes_only_a_run_that_succeeded(state_dir, monkeypatch, ran, noted):
    # as Salt hands it over: frozen, every result an ImmutableDict (no dict)
    from salt.utils.immutabletypes import freeze

    monkeypatch.setattr(state, "__running__", freeze(ran), raising=False)
    ret = state.converged("t1")
    assert ret["result"] is True and ret["changes"] == {}
    assert (state_dir / mod.CONVERGED_RECORD).exists() is noted, ret


def test_the_converged_state_refreshes_the_pillar_only_when_asked_and_noted(m, running):
    refresh = m["saltutil.refresh_pillar"]
    assert "refreshed" not in state.converged("t1")["comment"]
    refresh.assert_not_called()
    ret = state.converged("t1", refresh_pillar=True)
    assert ret["result"] is True and ret["changes"] == {}
    assert ret["comment"].endswith("its in-memory pillar is being refreshed"), ret
    refresh.assert_called_once_with(wait=False)
    # a run where a state failed notes nothing, and asks for nothing
    running["a"] = {"result": False}
    state.converged("t1", refresh_pillar=True)
    assert refresh.call_count == 1


def test_a_run_that_changed_something_sends_the_nodes_place_to_the_mine(m, pillar, running):
    """A worker that joined in this run says so at once: the first control plane's init
    guard reads it. A run that changed nothing sends nothing."""
    running["a"] = {"result": True, "changes": {}}
    state.converged("t1")
    m["mine.update"].assert_not_called()
    pillar["mine_functions"]["kos_kubernetes"] = [{"mine_function": "kos.kubernetes_state"}]
    state.converged("t1")
    m["mine.update"].assert_not_called()
    running["b"] = {"result": True, "changes": {"joined": {"old": None, "new": "k8s-cp-1"}}}
    ret = state.converged("t1")
    assert ret["comment"].endswith("kos_kubernetes sent to the mine"), ret
    m["mine.update"].assert_called_once_with(mine_functions={
        "kos_kubernetes": [{"mine_function": "kos.kubernetes_state"}]})


def test_the_first_control_plane_says_its_cluster_is_up_only_when_the_converge_ends(
        m, pillar, running, monkeypatch):
    """Its entry is what the master's reactor waits for; orch.deploy sends it last."""
    monkeypatch.setitem(state.__opts__, "id", CP)
    pillar["mine_functions"]["kos_kubernetes"] = [{"mine_function": "kos.kubernetes_state"}]
    running["b"] = {"result": True, "changes": {"initialized": {"old": None, "new": True}}}
    assert state.converged("t1")["result"] is True
    m["mine.update"].assert_not_called()


def test_the_converged_state_notes_nothing_in_test_mode(state_dir):
    state.__opts__["test"] = True
    assert state.converged("t1")["result"] is True
    assert not (state_dir / mod.CONVERGED_RECORD).exists()


def test_join_info_reads_the_nodes_own_credential(state_dir):
    assert mod.join_info(ME) == {}
    path = state_dir / "join" / f"{ME}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"node": ME, "role": "worker"}))
    assert mod.join_info(ME) == {"node": ME, "role": "worker"}
    assert mod.join_info("k8s-worker-2.example.com") == {}


def test_prepare_converge_sends_the_mine_only_for_a_valid_pillar(m, monkeypatch):
    m["mine.update"] = create_autospec(lambda: None, return_value=True)
    monkeypatch.setattr(mod, "pillar_errors", lambda: ["pillar key 'core:x': unknown key"])
    with pytest.raises(CommandExecutionError, match="invalid pillar:\npillar key 'core:x'"):
        mod.prepare_converge()
    m["mine.update"].assert_not_called()
    monkeypatch.setattr(mod, "pillar_errors", lambda: [])
    assert mod.prepare_converge() is True
    m["mine.update"].assert_called_once_with()


CP = "k8s-cp-1.example.com"


@pytest.fixture
def on_control_plane(monkeypatch, m):
    monkeypatch.setitem(mod.__opts__, "id", CP)
    m["microk8s_certs.certificates"] = create_autospec(microk8s_certs.certificates, return_value={
        "ca.crt": 3649, "server.crt": 12, "front-proxy-client.crt": 364})
    m["event.send"] = create_autospec(lambda tag, data=None: True, return_value=True)
    return m


def test_certificates_of_a_control_plane_with_the_threshold(on_control_plane, pillar):
    found = mod.certificates()
    assert found == {"days_left": 12, "warn_days": 30, "expiring": {"server.crt": 12},
                     "certificates": {"ca.crt": 3649, "front-proxy-client.crt": 364,
                                      "server.crt": 12}}
    pillar["kos"]["certificates"] = {"warn_days": 7}
    assert mod.certificates()["expiring"] == {}


def test_certificates_of_a_kubeadm_control_plane_leave_missing_files_out(on_control_plane, pillar):
    pillar["kos"]["distribution"] = "kubeadm"
    on_control_plane["kos_certs.certificates"] = create_autospec(
        lambda kube_dir=None: None, return_value={
            "certificates": {"admin.conf": {"days": 364}, "apiserver": {"days": -2},
                             "super-admin.conf": None},
            "authorities": {"ca": {"days": 3649}}})
    found = mod.certificates()
    assert found["days_left"] == -2 and found["expiring"] == {"apiserver": -2}
    assert sorted(found["certificates"]) == ["admin.conf", "apiserver", "ca"]


def test_a_worker_holds_no_certificates_to_check(m):
    assert mod.certificates() is None


def test_check_certificates_fires_the_event_only_below_the_threshold(on_control_plane, pillar):
    found = mod.check_certificates()
    (tag, data), _ = on_control_plane["event.send"].call_args
    assert tag == "kos/certificates/expiring"
    assert data == dict(found, id=CP)
    on_control_plane["event.send"].reset_mock()
    pillar["kos"]["certificates"] = {"warn_days": 5}
    mod.check_certificates()
    on_control_plane["event.send"].assert_not_called()


@pytest.fixture
def rebuilt_first(monkeypatch, m):
    """k8s-cp-1 holds nothing of a cluster: microk8s is not installed."""
    monkeypatch.setitem(mod.__opts__, "id", CP)
    del m["microk8s.status"]
    return m


@pytest.mark.parametrize("test_mode", [False, True])
def test_a_rebuilt_first_control_plane_never_initialises_a_second_cluster(rebuilt_first,
                                                                           test_mode):
    rebuilt_first["mine.get"].return_value = {
        "k8s-worker-2.example.com": {"joined": True}, ME: {"joined": True}}
    state.__opts__["test"] = test_mode
    ret = state.sole_cluster(CP)
    assert ret["result"] is False and ret["changes"] == {}
    assert ret["comment"].startswith(
        f"the first control plane {CP} holds no cluster, but {ME}, k8s-worker-2.example.com "
        "joined the cluster it initialised: initialising it would start a second cluster, so "
        "nothing changed"), ret
    # asked about the deployment's other nodes, by name
    rebuilt_first["mine.get"].assert_called_once_with(
        [ME, "k8s-worker-2.example.com"], "kos_kubernetes", tgt_type="list")


@pytest.mark.parametrize("said", [
    {},  # the first converge: nobody joined yet
    {ME: {"joined": False}, "k8s-worker-2.example.com": {"joined": None}},
])
def test_a_fresh_first_control_plane_initialises_when_nobody_joined(rebuilt_first, said):
    rebuilt_first["mine.get"].return_value = said
    assert state.sole_cluster(CP)["result"] is True


def test_the_init_guard_passes_a_first_control_plane_that_holds_its_cluster(m, monkeypatch):
    monkeypatch.setitem(mod.__opts__, "id", CP)
    m["mine.get"].return_value = {ME: {"joined": True}}
    ret = state.sole_cluster(CP)
    assert ret["result"] is True and "holds its cluster" in ret["comment"], ret
    # and any other node has nothing to guard
    monkeypatch.setitem(mod.__opts__, "id", ME)
    assert state.sole_cluster(CP)["comment"].startswith("not the first control plane")
    m["mine.get"].assert_not_called()
