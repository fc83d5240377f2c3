"""Unit tests of the microk8s states of a node and its cluster: running, join credentials,
joined and left; every state with test mode off and on."""

import json
import time

import pytest
from salt.exceptions import CommandExecutionError

from tests.unit.states import microk8s_states as loader
from tests.unit.states.microk8s_states import ME, STATES, expect_applied, st, without_the_snap

# the fixtures: the microk8s state modules on one loader
m, test_mode, state_dir = loader.m, loader.test_mode, loader.state_dir
configure_loader_modules = loader.configure_loader_modules

states = STATES["microk8s"]


def test_running_nothing_to_do(m):
    m["microk8s.status"].return_value = st()
    ret = states.running("microk8s")
    assert ret["result"] is True and ret["changes"] == {}
    m["microk8s.start"].assert_not_called()


def test_running_starts_a_stopped_node(m, test_mode):
    m["microk8s.status"].side_effect = [st(running=False, stopped=True), st()]
    ret = states.running("microk8s", timeout=30)
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"running": {"old": False, "new": True}}
    if test_mode:
        m["microk8s.start"].assert_not_called()
    else:
        m["microk8s.start"].assert_called_once_with()
        m["microk8s.status"].assert_called_with(wait_ready=True, timeout=30)


def issued(state_dir, node=ME, expires=None, check="abcdefabcdef", token="t" * 32,
           role="worker"):
    path = state_dir / "join" / f"{node}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "node": node, "role": role, "connection": f"10.1.0.11:25000/{token}/{check}",
        "check": check, "expires": time.time() + 5000 if expires is None else expires}))
    return path


def add_node(ttl=None, token=None):
    return {"token": f"{token}/abcdefabcdef",
            "urls": [f"172.17.0.1:25000/{token}/abcdefabcdef",
                     f"10.1.0.11:25000/{token}/abcdefabcdef"],
            "expires": int(time.time()) + ttl}


def test_credential_reused_while_enough_ttl_remains(m, state_dir):
    issued(state_dir)
    m["microk8s.cert_check"].return_value = "abcdefabcdef"
    m["microk8s.token_valid"].return_value = True
    ret = states.join_credential_present(ME, role="worker", ttl=1800, min_remaining=600)
    assert ret["result"] is True and ret["changes"] == {}
    m["microk8s.add_node"].assert_not_called()
    # published again, to that minion only (a cleared mine cache loses nothing)
    m["mine.send"].assert_called_once_with(f"kos_join_{ME}", mine_function="kos.join_info",
                                           node=ME, allow_tgt=ME, allow_tgt_type="list")


@pytest.mark.parametrize("why", ["near-expiry", "unknown-to-agent", "cert-changed", "none",
                                 "other-role"])
def test_credential_issued_for_the_node_alone(m, state_dir, test_mode, why):
    path = state_dir / "join" / f"{ME}.json"
    if why != "none":
        issued(state_dir, expires=time.time() + (100 if why == "near-expiry" else 5000),
               role="control_plane" if why == "other-role" else "worker")
    m["microk8s.cert_check"].return_value = "ffffffffffff" if why == "cert-changed" else "abcdefabcdef"
    m["microk8s.token_valid"].return_value = why != "unknown-to-agent"
    m["microk8s.add_node"].side_effect = add_node
    before = path.read_text() if path.exists() else None
    ret = states.join_credential_present(ME, role="worker", ttl=1800, min_remaining=600,
                                         cidr="10.1.0.0/16")
    expect_applied(ret, test_mode)
    if test_mode:
        m["microk8s.add_node"].assert_not_called()
        m["mine.send"].assert_not_called()
        assert (path.read_text() if path.exists() else None) == before
        return
    token = m["microk8s.add_node"].call_args.kwargs["token"]
    assert m["microk8s.add_node"].call_args.kwargs["ttl"] == 1800  # a TTL: survives a failed join
    assert len(token) == 32 and token not in json.dumps(ret)  # never in the state return
    doc = json.loads(path.read_text())
    assert doc["connection"] == f"10.1.0.11:25000/{token}/abcdefabcdef"  # the private URL
    assert (doc["node"], doc["role"]) == (ME, "worker")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    m["mine.send"].assert_called_once_with(f"kos_join_{ME}", mine_function="kos.join_info",
                                           node=ME, allow_tgt=ME, allow_tgt_type="list")
    if why != "none":  # the credential it replaces is withdrawn
        m["microk8s.remove_token"].assert_called_once_with("t" * 32, None)


def test_no_credential_is_issued_without_an_address_in_the_network(m):
    m["microk8s.cert_check"].return_value = "abcdefabcdef"
    m["network.ip_addrs"].return_value = []
    ret = states.join_credential_present(ME, role="worker", cidr="10.9.0.0/16")
    assert ret["result"] is False and "10.9.0.0/16" in ret["comment"]
    m["microk8s.add_node"].assert_not_called()


def test_a_credential_that_cannot_be_published_is_withdrawn(m, state_dir):
    """add-node succeeded, the publication failed: nobody may use the token."""
    m["microk8s.cert_check"].return_value = "abcdefabcdef"
    m["microk8s.add_node"].side_effect = add_node
    m["mine.send"].return_value = False
    ret = states.join_credential_present(ME, role="worker", cidr="10.1.0.0/16")
    assert ret["result"] is False and "mine.send" in ret["comment"]
    token = m["microk8s.add_node"].call_args.kwargs["token"]
    m["microk8s.remove_token"].assert_called_once_with(token, None)
    assert not (state_dir / "join" / f"{ME}.json").exists()


@pytest.mark.parametrize("kwargs, words", [
    ({"role": "worker", "ttl": 600, "min_remaining": 1800}, "min_remaining"),
    ({"role": "admin"}, "role must be worker or control_plane"),
])
def test_credential_arguments_are_checked(m, kwargs, words):
    ret = states.join_credential_present(ME, **kwargs)
    assert ret["result"] is False and words in ret["comment"]
    m["microk8s.add_node"].assert_not_called()


def test_credentials_revoked(m, state_dir, test_mode):
    one = issued(state_dir, token="a" * 32)
    other = issued(state_dir, node="k8s-worker-2.example.com", token="b" * 32)
    ret = states.join_credentials_absent("creds", nodes=[ME, "k8s-cp-9.example.com"])
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"credentials": {"old": [ME], "new": []}}
    assert "a" * 32 not in json.dumps(ret)
    assert other.exists()
    if test_mode:
        assert one.exists()
        m["microk8s.remove_token"].assert_not_called()
        return
    assert not one.exists()
    assert [c.args[0] for c in m["microk8s.remove_token"].call_args_list] == ["a" * 32]
    m["mine.delete"].assert_called_once_with(f"kos_join_{ME}")
    again = states.join_credentials_absent("creds", nodes=[ME])
    assert again["result"] is True and again["changes"] == {}


def test_every_credential_revoked_without_a_list(m, state_dir):
    issued(state_dir, token="a" * 32)
    issued(state_dir, node="k8s-worker-2.example.com", token="b" * 32)
    ret = states.join_credentials_absent("creds")
    assert ret["changes"]["credentials"]["old"] == [ME, "k8s-worker-2.example.com"]
    assert list((state_dir / "join").iterdir()) == []


def join_doc(node=ME, role="worker", expires=None):
    return {"cp1": {"node": node, "role": role,
                    "connection": "10.1.0.11:25000/" + "t" * 32 + "/c" * 1,
                    "expires": time.time() + 3000 if expires is None else expires}}


def test_cluster_joined_does_nothing_when_joined(m):
    m["microk8s.status"].return_value = st(worker=True)
    m["microk8s.is_clustered"].return_value = True
    ret = states.cluster_joined("cp1", source="cp1", role="worker")
    assert ret["result"] is True and ret["changes"] == {}
    m["microk8s.join"].assert_not_called()


def test_cluster_joined_worker_with_its_own_credential(m, test_mode):
    m["microk8s.status"].side_effect = [st(), st(worker=True)]
    m["microk8s.is_clustered"].side_effect = [False, True]
    m["mine.get"].return_value = join_doc()
    ret = states.cluster_joined("cp1", source="cp1", role="worker")
    expect_applied(ret, test_mode)
    assert "t" * 32 not in json.dumps(ret)
    if test_mode:
        m["microk8s.join"].assert_not_called()
    else:
        m["mine.get"].assert_called_once_with("cp1", f"kos_join_{ME}")
        assert m["microk8s.join"].call_args.kwargs == {"worker": True}


def test_cluster_joined_control_plane(m):
    m["microk8s.status"].side_effect = [st(), st(nodes=2)]
    m["microk8s.is_clustered"].side_effect = [False, True]
    m["mine.get"].return_value = join_doc(role="control_plane")
    ret = states.cluster_joined("cp1", source="cp1", role="control_plane")
    assert ret["result"] is True
    assert m["microk8s.join"].call_args.kwargs == {"worker": False}


def test_cluster_joined_reports_why_it_failed(m):
    m["microk8s.status"].return_value = st()
    m["mine.get"].return_value = join_doc()
    m["microk8s.join"].side_effect = CommandExecutionError("Connection failed. Invalid token (500).")
    ret = states.cluster_joined("cp1", source="cp1")
    assert ret["result"] is False and "Invalid token (500)" in ret["comment"]


@pytest.mark.parametrize("mine, words", [
    ({}, "issued no join credential"),
    (join_doc(expires=1), "expires in"),
    (join_doc(role="control_plane"), "not for"),
    (join_doc(node="k8s-worker-2.example.com"), "not for"),
], ids=["missing", "expired", "other-role", "other-node"])
def test_cluster_joined_refuses_a_credential_it_cannot_use(m, mine, words):
    m["microk8s.status"].return_value = st()
    m["mine.get"].return_value = mine
    ret = states.cluster_joined("cp1", source="cp1", role="worker")
    assert ret["result"] is False and words in ret["comment"], ret
    m["microk8s.join"].assert_not_called()


def test_cluster_left(m, test_mode):
    m["microk8s.status"].return_value = st(worker=True)
    m["microk8s.is_clustered"].side_effect = [True, False]
    ret = states.cluster_left("microk8s")
    expect_applied(ret, test_mode)
    assert m["microk8s.leave"].called is (not test_mode)
    m["microk8s.is_clustered"].side_effect = None
    m["microk8s.is_clustered"].return_value = False
    assert states.cluster_left("microk8s")["changes"] == {}


# `microk8s status` on a stopped control plane: it lists no datastore member
STOPPED = dict(st(running=False, stopped=True, nodes=0),
               high_availability={"enabled": False, "nodes": []},
               message="microk8s is not running, try microk8s start")


def test_a_stopped_member_is_never_reported_as_left(m, test_mode):
    """orch.remove took "not part of a cluster" for done, and its next step failed."""
    m["microk8s.status"].return_value = STOPPED
    m["microk8s.is_clustered"].return_value = True
    ret = states.cluster_left("microk8s")
    assert ret["result"] is False and ret["changes"] == {}, ret
    assert "start it (microk8s start), then leave" in ret["comment"]
    m["microk8s.leave"].assert_not_called()


def test_a_stopped_member_is_already_part_of_a_cluster(m, test_mode):
    m["microk8s.status"].return_value = STOPPED
    m["microk8s.is_clustered"].return_value = True
    ret = states.cluster_joined("cp1", source="cp1", role="control_plane")
    assert (ret["result"], ret["changes"]) == (True, {}), ret
    assert ret["comment"] == "already part of a cluster"
    m["microk8s.join"].assert_not_called()


def test_a_stopped_node_that_cannot_tell_fails_both_ways(m, test_mode):
    m["microk8s.status"].return_value = STOPPED
    m["microk8s.is_clustered"].side_effect = CommandExecutionError(
        "microk8s is stopped and .../cluster.yaml cannot be read, so whether this node is in a "
        "cluster cannot be told: start it (microk8s start) first")
    for ret in (states.cluster_joined("cp1", source="cp1", role="control_plane"),
                states.cluster_left("microk8s")):
        assert ret["result"] is False and "start it (microk8s start)" in ret["comment"], ret
        assert ret["changes"] == {}
    m["microk8s.join"].assert_not_called()
    m["microk8s.leave"].assert_not_called()


def test_a_test_run_without_the_snap_predicts(m, state_dir, tmp_path):
    """The snap comes in the same highstate: "State 'microk8s.running' was not found" before."""
    without_the_snap(m)
    states.__opts__["test"] = True
    rets = [
        states.running("microk8s"),
        STATES["microk8s_addons"].addon_enabled("dns"),
        STATES["microk8s_certs"].extra_sans("csr", sans=["203.0.113.10"], snap_data=str(tmp_path)),
        states.join_credential_present(ME, role="worker"),
        states.cluster_joined("cp1", source="cp1", role="worker"),
    ]
    for ret in rets:
        assert ret["result"] is None and ret["changes"], ret
        assert ret["comment"].startswith("would ") and "once microk8s is installed" in ret["comment"]
    assert rets[4]["changes"] == {"cluster": {"old": "standalone", "new": "joined cp1 as worker"}}
    assert not state_dir.exists()
    states.__opts__["test"] = False
    assert states.running("microk8s")["result"] is False
