"""Unit tests of the kubeadm join credential states (kubeadm_join): issued, reused,
revoked, with test mode off and on; never a secret in a return."""

import json
import time

import pytest

from tests.unit.states import kubeadm_states as shared
from tests.unit.conftest import load
from tests.unit.states.kubeadm_states import (
    CP2,
    FRESH,
    HASH,
    INITIALIZED,
    KEY,
    ME,
    NEW_TOKEN,
    PROXY,
    expect_applied,
    no_secrets,
    tok,
)

states = load("states", "kubeadm_join")

# the fixtures: every kubeadm state module on one __salt__ of mocked execution functions
test_mode, state_dir, m = shared.test_mode, shared.state_dir, shared.m
configure_loader_modules = shared.configure_loader_modules


# --- credential_present ----------------------------------------------------------------------

def issued(state_dir, node=ME, role="worker", token_id="abcdef", ca=HASH, key=None,
           owner="q1w2e3"):
    path = state_dir / "join" / f"{node}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"node": node, "role": role, "token": f"{token_id}.0123456789abcdef",
           "token_id": token_id, "ca_cert_hash": ca, "expires": int(time.time() + 1500)}
    if key:
        doc.update(certificate_key=key, owner_token_id=owner)
    path.write_text(json.dumps(doc))
    return path


def sends(m):
    return [c.args[0] for c in m["mine.send"].call_args_list]


def test_credential_reused_while_enough_ttl_remains(m, state_dir):
    issued(state_dir)
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kos_join.token_list"].return_value = [tok("abcdef", time.time() + 1500)]
    ret = states.credential_present(ME, role="worker", ttl=1800, min_remaining=600)
    assert ret["result"] is True and ret["changes"] == {}, ret
    m["kos_join.token_create"].assert_not_called()
    m["mine.send"].assert_called_once_with(f"kos_join_{ME}", mine_function="kos.join_info",
                                           node=ME, allow_tgt=ME, allow_tgt_type="list")


@pytest.mark.parametrize("why", ["none", "gone", "near-expiry", "ca-changed", "other-role"])
def test_a_workers_credential_is_a_token_of_its_own(m, state_dir, test_mode, why):
    path = state_dir / "join" / f"{ME}.json"
    listed = [tok("abcdef", time.time() + (100 if why == "near-expiry" else 1500))]
    if why == "other-role":
        issued(state_dir, role="control_plane", key=KEY)
        listed.append(tok("q1w2e3", time.time() + 6000, PROXY))
    elif why != "none":
        issued(state_dir, ca=HASH if why != "ca-changed" else "sha256:x")
    if why == "gone":
        listed = []  # expired tokens vanish from the cluster
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kos_join.token_create"].return_value = NEW_TOKEN
    new_expiry = time.time() + 1800
    fresh = listed + [tok("newtok", new_expiry)]
    m["kos_join.token_list"].side_effect = [listed, fresh, fresh]
    before = path.read_text() if path.exists() else None
    ret = states.credential_present(ME, role="worker", node_name="k8s-worker-1", ttl=1800,
                                         min_remaining=600)
    expect_applied(ret, test_mode)
    no_secrets(ret)
    if test_mode:
        m["kos_join.token_create"].assert_not_called()
        assert (path.read_text() if path.exists() else None) == before
        return
    m["kos_join.token_create"].assert_called_once_with(ttl=1800,
                                                       description="kos: node join k8s-worker-1")
    m["kos_join.upload_certs"].assert_not_called()  # a worker never gets the certificate key
    doc = json.loads(path.read_text())
    assert doc["token"] == NEW_TOKEN and doc["ca_cert_hash"] == HASH
    assert (doc["node"], doc["role"], doc["expires"]) == (ME, "worker", int(new_expiry))
    assert "certificate_key" not in doc
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert sends(m) == [f"kos_join_{ME}"]
    deleted = sorted(c.args[0] for c in m["kos_join.token_delete"].call_args_list)
    expected = {"near-expiry": ["abcdef"], "ca-changed": ["abcdef"],
                "other-role": ["abcdef", "q1w2e3"]}.get(why, [])
    assert deleted == expected


class Cluster:
    """The tokens kubeadm lists: token create and upload-certs add theirs, delete removes."""

    def __init__(self, m, tokens, owner_expires=None):
        self.tokens = list(tokens)
        m["kos_join.token_list"].side_effect = lambda: list(self.tokens)
        m["kos_join.token_create"].side_effect = self.create
        m["kos_join.token_delete"].side_effect = self.delete
        m["kos_join.upload_certs"].side_effect = self.upload
        self.owner_expires = owner_expires

    def create(self, ttl=None, description=None, **kwargs):
        self.tokens.append(tok("newtok", time.time() + ttl, description))
        return NEW_TOKEN

    def delete(self, token_id):
        self.tokens = [t for t in self.tokens if t["id"] != token_id]

    def upload(self, config=None):
        if self.owner_expires:
            self.tokens.append(tok("fresh1", self.owner_expires, PROXY))
        return "b" * 64


@pytest.mark.parametrize("why", ["none", "secret-gone", "stale", "replaced"])
def test_a_control_planes_credential_carries_a_certificate_key(m, state_dir, test_mode, why):
    now = time.time()
    owner = tok("q1w2e3", now + (600 if why == "stale" else 6000), PROXY)
    listed = [tok("abcdef", now + 1500), owner]
    if why == "secret-gone":
        listed = listed[:1]
    if why == "replaced":
        listed.append(tok("later1", now + 7000, PROXY))
    if why != "none":
        issued(state_dir, node=CP2, role="control_plane", key=KEY)
    m["kubeadm.init_status"].return_value = INITIALIZED
    cluster = Cluster(m, listed, owner_expires=now + 7200)
    ret = states.credential_present(CP2, role="control_plane", config="/k/c.yaml")
    expect_applied(ret, test_mode)
    no_secrets(ret)
    assert "b" * 64 not in json.dumps(ret)
    if test_mode:
        m["kos_join.upload_certs"].assert_not_called()
        return
    m["kos_join.upload_certs"].assert_called_once_with(config="/k/c.yaml")
    doc = json.loads((state_dir / "join" / f"{CP2}.json").read_text())
    assert doc["certificate_key"] == "b" * 64 and doc["owner_token_id"] == "fresh1"
    assert doc["key_expires"] == int(now + 7200) and doc["role"] == "control_plane"
    # only what was stale is issued again, and what it replaces is deleted
    assert m["kos_join.token_create"].called is (why == "none")
    ids = {t["id"] for t in cluster.tokens}
    assert ("q1w2e3" in ids) is (why == "none")


def test_credential_arguments_are_checked(m, state_dir):
    for kwargs, words in (({"role": "worker", "ttl": 600, "min_remaining": 900}, "min_remaining"),
                          ({"role": "etcd"}, "role must be")):
        ret = states.credential_present(ME, **kwargs)
        assert ret["result"] is False and words in ret["comment"]
    m["kos_join.token_create"].assert_not_called()


def test_credentials_need_a_control_plane(m, test_mode):
    m["kubeadm.init_status"].return_value = FRESH
    ret = states.credential_present(ME, role="worker")
    if test_mode:
        # a test run on a fresh node: init comes first in the same run
        assert ret["result"] is None and "once the control plane is initialized" in ret["comment"]
    else:
        assert ret["result"] is False and "runs no initialized control plane" in ret["comment"]
        assert FRESH["reason"] in ret["comment"]
    m["kos_join.token_create"].assert_not_called()


def test_a_credential_that_cannot_be_published_is_deleted_again(m, state_dir):
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kos_join.token_create"].return_value = NEW_TOKEN
    m["kos_join.token_list"].side_effect = [[], [tok("newtok", time.time() + 1800)]]
    m["mine.send"].return_value = False
    ret = states.credential_present(ME, role="worker")
    assert ret["result"] is False and "issuing a join credential" in ret["comment"]
    m["kos_join.token_delete"].assert_called_once_with("newtok")


def test_certificate_key_upload_without_owner_fails(m, state_dir):
    m["kubeadm.init_status"].return_value = INITIALIZED
    cluster = Cluster(m, [], owner_expires=None)
    ret = states.credential_present(CP2, role="control_plane")
    assert ret["result"] is False and "no token owns" in ret["comment"]
    assert KEY not in json.dumps(ret) and "b" * 64 not in json.dumps(ret)
    assert cluster.tokens == []  # the token this run created is deleted again


# --- credentials_absent ----------------------------------------------------------------------

def test_credentials_absent_nothing_left(m):
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kos_join.token_list"].return_value = [tok("zz9yx8", None, "")]
    ret = states.credentials_absent("creds", nodes=[ME])
    assert ret["result"] is True and ret["changes"] == {}
    m["kos_join.token_delete"].assert_not_called()


def test_credentials_revoked(m, state_dir, test_mode):
    worker = issued(state_dir, token_id="abcdef")
    cp = issued(state_dir, node=CP2, role="control_plane", token_id="cp2tok", key=KEY)
    kept = issued(state_dir, node="k8s-worker-2.example.com", token_id="w2tokn")
    m["kubeadm.init_status"].return_value = INITIALIZED
    own = "kos: node join k8s-"
    m["kos_join.token_list"].return_value = [
        tok("abcdef", time.time() + 1500, own + "worker-1"),
        tok("cp2tok", time.time() + 1500, own + "cp-2"),
        tok("w2tokn", time.time() + 1500, own + "worker-2"),
        tok("initkn", time.time() + 300),  # kubeadm init's own token
        tok("q1w2e3", time.time() + 6000, PROXY), tok("other1", None, "someone else's"),
    ]
    ret = states.credentials_absent("creds", nodes=[ME, CP2])
    expect_applied(ret, test_mode)
    no_secrets(ret)
    assert ret["changes"]["credentials"]["old"] == [CP2, ME]
    assert ret["changes"]["tokens"] == {"old": 4, "new": 0}
    assert kept.exists()
    if test_mode:
        m["kos_join.token_delete"].assert_not_called()
        assert worker.exists() and cp.exists()
        return
    deleted = [c.args[0] for c in m["kos_join.token_delete"].call_args_list]
    assert deleted == ["abcdef", "cp2tok", "initkn", "q1w2e3"]
    assert not worker.exists() and not cp.exists()
    assert sorted(c.args[0] for c in m["mine.delete"].call_args_list) == [
        f"kos_join_{CP2}", f"kos_join_{ME}"]


def test_the_shared_tokens_go_with_an_empty_list(m, state_dir, test_mode):
    """kubeadm init's own token (the description alone) goes; a node's own stays."""
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kos_join.token_list"].return_value = [tok("initkn", time.time() + 600),
                                             tok("w1tokn", time.time() + 900,
                                                 "kos: node join k8s-worker-1")]
    ret = states.credentials_absent("creds", nodes=[])
    expect_applied(ret, test_mode)
    assert ret["changes"]["tokens"] == {"old": 1, "new": 0}
    deleted = [c.args[0] for c in m["kos_join.token_delete"].call_args_list]
    assert deleted == ([] if test_mode else ["initkn"])


def test_without_a_list_every_kos_token_goes(m, state_dir):
    m["kubeadm.init_status"].return_value = INITIALIZED
    m["kos_join.token_list"].return_value = [tok("stray1", time.time() + 300),
                                             tok("other1", None, "someone else's")]
    ret = states.credentials_absent("creds")
    assert ret["result"] is True and ret["changes"]["tokens"] == {"old": 1, "new": 0}
    m["kos_join.token_delete"].assert_called_once_with("stray1")


def test_credentials_predicted_on_a_node_without_kubeadm(m, state_dir):
    """The first control plane's packages come in the same highstate: a test run predicts."""
    issued(state_dir)
    for name in [k for k in m if k.startswith(("kubeadm.", "kos_join."))]:
        del m[name]
    states.__opts__["test"] = True
    ret = states.credential_present(ME, role="worker")
    assert ret["result"] is None and "once kubeadm is installed" in ret["comment"], ret
    ret = states.credentials_absent("creds", nodes=[ME])
    assert ret["result"] is None and "once kubeadm is installed" in ret["comment"], ret
    states.__opts__["test"] = False
    assert states.credential_present(ME, role="worker")["result"] is False
