"""Unit tests of the kubeadm membership states (initialized, joined, the way out): every
state with test mode off and on."""

import json
import time

import pytest
from salt.exceptions import CommandExecutionError

from tests.unit.states import kubeadm_states as shared
from tests.unit.conftest import load
from tests.unit.states.kubeadm_states import (
    FRESH,
    HASH,
    INITIALIZED,
    JOINED,
    KEY,
    ME,
    NOT_JOINED,
    TIMED_OUT,
    TOKEN,
    expect_applied,
    expect_reset_and_redone,
    init,
    join,
    no_secrets,
)

states = load("states", "kubeadm")

# the fixtures: every kubeadm state module on one __salt__ of mocked execution functions
test_mode, state_dir, m = shared.test_mode, shared.state_dir, shared.m
configure_loader_modules = shared.configure_loader_modules


# --- initialized -----------------------------------------------------------------------------

def test_initialized_nothing_to_do(m):
    m["kubeadm.init_status"].return_value = INITIALIZED
    ret = states.initialized("/k/kubeadm-config.yaml")
    assert ret["result"] is True and ret["changes"] == {}
    m["kubeadm.init"].assert_not_called()


def test_initialized_runs_init_or_its_dry_run(m, test_mode, tmp_path, state_dir):
    config = tmp_path / "kubeadm-config.yaml"
    config.write_text("kind: InitConfiguration\n")
    m["kubeadm.init_status"].side_effect = [FRESH, INITIALIZED]
    ret = states.initialized(str(config), timeout=30)
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"control_plane": {"old": None, "new": "initialized"}}
    if test_mode:
        m["kubeadm.init"].assert_called_once_with(str(config), dry_run=True,
                                                  ignore_preflight_errors=None, kube_dir=None)
        m["kos_kubectl.api_ready"].assert_not_called()
    else:
        m["kubeadm.init"].assert_called_once_with(str(config), upload_certs=False,
                                                  ignore_preflight_errors=None, kube_dir=None)
        m["kos_kubectl.api_ready"].assert_called_once_with(timeout=30)
        m["kubeadm.reset"].assert_not_called()
    # the note of an init under way is gone once it is seen finished
    assert not (state_dir / "kubeadm-init.json").exists()


def test_initialized_test_mode_without_the_file_yet(m, tmp_path):
    states.__opts__["test"] = True
    ret = states.initialized(str(tmp_path / "missing.yaml"))
    assert ret["result"] is None and "once" in ret["comment"]
    m["kubeadm.init"].assert_not_called()


def test_initialized_reports_preflight_failure_and_keeps_its_note(m, test_mode, tmp_path,
                                                                   state_dir):
    config = tmp_path / "c.yaml"
    config.write_text("x")
    m["kubeadm.init"].side_effect = CommandExecutionError(
        "error execution phase preflight: [preflight] Some fatal errors occurred:\n"
        "\t[ERROR Swap]: running with swap on is not supported. Please disable swap")
    ret = states.initialized(str(config))
    assert ret["result"] is False and "Swap" in ret["comment"] and ret["changes"] == {}
    # a real run noted its init before kubeadm started: the next run knows it as its own
    assert (state_dir / "kubeadm-init.json").exists() is (not test_mode)


def test_initialized_fails_when_the_api_never_answers(m):
    m["kubeadm.init_status"].side_effect = [FRESH, INITIALIZED]
    m["kos_kubectl.api_ready"].return_value = False
    ret = states.initialized("/k/c.yaml", timeout=5)
    assert ret["result"] is False and "does not answer" in ret["comment"]
    assert ret["changes"] == {"control_plane": {"old": None,
                                                "new": "kubeadm init ran, not seen initialized"}}


def test_an_init_that_fails_after_the_reset_reports_the_reset(m, tmp_path, state_dir):
    config = tmp_path / "c.yaml"
    config.write_text("x")
    state_dir.mkdir()
    (state_dir / "kubeadm-init.json").write_text(json.dumps({"started": 1}))
    m["kubeadm.init_status"].return_value = TIMED_OUT
    m["kubeadm.init"].side_effect = CommandExecutionError("[ERROR Port-6443]: Port 6443 is in use")
    ret = states.initialized(str(config), timeout=5)
    assert ret["result"] is False and "Port 6443 is in use" in ret["comment"], ret
    m["kubeadm.reset"].assert_called_once_with()
    assert ret["changes"] == {"control_plane": {"old": f"half-initialized: {TIMED_OUT['reason']}",
                                                "new": "reset (kubeadm reset -f)"}}


@pytest.mark.parametrize("half", [
    TIMED_OUT,
    init(False, True, True, "kubeadm init stopped before upload-config "
                            "(no kube-system/kubeadm-config)"),
], ids=["api-down", "no-kubeadm-config"])
def test_a_half_done_init_of_ours_is_reset_and_redone(m, test_mode, tmp_path, state_dir, half):
    """The manifests exist (control-plane phase) but init never finished: the old
    `kube-apiserver.yaml exists` check called that initialized, forever."""
    config = tmp_path / "c.yaml"
    config.write_text("x")
    state_dir.mkdir()
    (state_dir / "kubeadm-init.json").write_text(json.dumps({"started": 1}))
    m["kubeadm.init_status"].side_effect = [half, INITIALIZED]
    ret = states.initialized(str(config), timeout=5)
    expect_applied(ret, test_mode)
    assert ret["changes"]["control_plane"]["old"] == f"half-initialized: {half['reason']}"
    assert half["reason"] in ret["comment"]
    expect_reset_and_redone(m, test_mode, "init")
    # The note of the half-done init goes with the init done again.
    assert (state_dir / "kubeadm-init.json").exists() is test_mode


def test_a_control_plane_this_state_did_not_start_is_never_reset(m, test_mode, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("x")
    m["kubeadm.init_status"].return_value = TIMED_OUT
    m["kos_kubectl.api_ready"].return_value = False
    ret = states.initialized(str(config), timeout=1)
    assert ret["result"] is False and "not reset" in ret["comment"], ret
    assert "127.0.0.1:7443 was refused" in ret["comment"]
    m["kos_kubectl.api_ready"].assert_called_once_with(timeout=1)
    m["kubeadm.reset"].assert_not_called()
    m["kubeadm.init"].assert_not_called()


def test_a_slow_api_of_an_initialized_node_is_waited_for(m, tmp_path):
    m["kubeadm.init_status"].side_effect = [TIMED_OUT, INITIALIZED]
    ret = states.initialized(str(tmp_path / "c.yaml"), timeout=7)
    assert ret["result"] is True and ret["changes"] == {}
    m["kos_kubectl.api_ready"].assert_called_once_with(timeout=7)


# --- joined ----------------------------------------------------------------------------------

def mine(m, node=ME, role="worker", token=None, key=None, left=1500, key_left=6000):
    doc = {"node": node, "role": role, "token": token or TOKEN, "ca_cert_hash": HASH,
           "expires": time.time() + left}
    if role == "control_plane" and key is not False:
        doc.update(certificate_key=key or KEY, key_expires=time.time() + key_left)
    m["mine.get"].side_effect = lambda tgt, fun, *a, **kw: (
        {"k8s-cp-1": doc} if fun == f"kos_join_{ME}" else {})


def test_joined_does_nothing_when_joined(m):
    m["kubeadm.join_status"].return_value = JOINED
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443")
    assert ret["result"] is True and ret["changes"] == {}
    m["kubeadm.join"].assert_not_called()


def test_joined_worker(m, test_mode):
    m["kubeadm.join_status"].side_effect = [NOT_JOINED, JOINED]
    mine(m)
    args = [{"name": "cloud-provider", "value": "external"}]
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", node_name="k8s-worker-1",
                        kubelet_extra_args=args, discovery_timeout=300)
    expect_applied(ret, test_mode)
    no_secrets(ret)
    m["kubeadm.join_status"].assert_called_with("k8s-worker-1", control_plane=False,
                                                stacked_etcd=True, kube_dir=None)
    if test_mode:
        m["kubeadm.join"].assert_not_called()
        m["mine.get"].assert_not_called()
    else:
        m["kubeadm.join"].assert_called_once_with(
            "127.0.0.1:7443", TOKEN, HASH, control_plane=False, certificate_key=None,
            node_name="k8s-worker-1", advertise_address=None, bind_port=None, cri_socket=None,
            kubelet_extra_args=args, discovery_timeout=300)
        m["kos_kubectl.api_ready"].assert_not_called()
        m["kubeadm.reset"].assert_not_called()
        assert [c.args for c in m["mine.get"].call_args_list] == [("k8s-cp-1", f"kos_join_{ME}")]


def test_joined_control_plane_uses_the_certificate_key(m):
    m["kubeadm.join_status"].side_effect = [NOT_JOINED, JOINED]
    mine(m, role="control_plane")
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2", advertise_address="10.1.0.12", bind_port=6443,
                        timeout=30)
    assert ret["result"] is True, ret
    kwargs = m["kubeadm.join"].call_args.kwargs
    assert kwargs["control_plane"] is True and kwargs["certificate_key"] == KEY
    assert kwargs["advertise_address"] == "10.1.0.12"
    m["kos_kubectl.api_ready"].assert_called_once_with(timeout=30)
    no_secrets(ret)


ETCD_STEP_FAILED = join(False, True, True, "node k8s-cp-2 is registered but runs no etcd member "
                                           "(no Pod kube-system/etcd-k8s-cp-2)")


def test_a_control_plane_join_that_failed_at_etcd_is_reset_and_redone(m, test_mode):
    """kubelet.conf exists and the node is registered: the old check said joined, forever."""
    m["kubeadm.join_status"].side_effect = [ETCD_STEP_FAILED, JOINED]
    mine(m, role="control_plane")
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2", timeout=5)
    expect_applied(ret, test_mode)
    assert ret["changes"]["cluster"]["old"] == f"half-joined: {ETCD_STEP_FAILED['reason']}"
    assert ETCD_STEP_FAILED["reason"] in ret["comment"]
    expect_reset_and_redone(m, test_mode, "join")


def test_a_member_whose_api_does_not_answer_is_never_reset(m, tmp_path, test_mode):
    kube = tmp_path / "kube"
    kube.mkdir()
    (kube / "kubelet.conf").write_text("x")
    m["kubeadm.join_status"].return_value = join(False, True, False,
                                                 "the API does not answer (EOF)")
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", kube_dir=str(kube))
    assert ret["result"] is False and "EOF" in ret["comment"], ret
    m["kubeadm.reset"].assert_not_called()
    m["kubeadm.join"].assert_not_called()


def test_a_join_that_fails_after_the_reset_reports_the_reset(m):
    """The node lost its cluster files: a failed state that says "no changes" hides that."""
    m["kubeadm.join_status"].return_value = ETCD_STEP_FAILED
    m["kubeadm.join"].side_effect = CommandExecutionError("couldn't validate the identity of "
                                                          "the API Server")
    mine(m, role="control_plane")
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2")
    assert ret["result"] is False and "identity of the API Server" in ret["comment"], ret
    m["kubeadm.reset"].assert_called_once_with()
    assert ret["changes"] == {"cluster": {"old": f"half-joined: {ETCD_STEP_FAILED['reason']}",
                                          "new": "reset (kubeadm reset -f)"}}


def test_a_join_that_never_shows_reports_that_it_ran(m):
    m["kubeadm.join_status"].side_effect = [NOT_JOINED] + [ETCD_STEP_FAILED] * 5
    mine(m, role="control_plane")
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2", timeout=0)
    assert ret["result"] is False
    assert ret["changes"] == {"cluster": {"old": None,
                                          "new": "kubeadm join ran, not seen joined"}}


def test_a_failure_before_anything_ran_reports_no_changes(m):
    m["kubeadm.join_status"].return_value = ETCD_STEP_FAILED
    mine(m, role="control_plane", key=False)
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2")
    assert ret["result"] is False and ret["changes"] == {}, ret
    m["kubeadm.reset"].assert_not_called()


def test_a_member_in_the_configured_directory_is_never_reset(m, tmp_path, test_mode):
    """kubeadm:kube_dir set in the minion configuration, no kube_dir argument: the state
    looked for kubelet.conf in /etc/kubernetes and reset the member."""
    kube = tmp_path / "kube"
    kube.mkdir()
    (kube / "kubelet.conf").write_text("x")
    m["config"]["kubeadm:kube_dir"] = str(kube)
    m["kubeadm.join_status"].return_value = join(False, True, False,
                                                 "the API does not answer (EOF)")
    mine(m, role="worker")
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443")
    assert ret["result"] is False and "never reset on a guess" in ret["comment"], ret
    assert ret["changes"] == {}
    m["kubeadm.reset"].assert_not_called()
    m["kubeadm.join"].assert_not_called()


def test_a_join_that_never_shows_as_joined_fails_with_the_reason(m):
    m["kubeadm.join_status"].side_effect = [NOT_JOINED] + [ETCD_STEP_FAILED] * 5
    mine(m, role="control_plane")
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane",
                        node_name="k8s-cp-2", timeout=0)
    assert ret["result"] is False and "runs no etcd member" in ret["comment"]


@pytest.mark.parametrize("case, words", [
    ("no-token", "issued no join credential"), ("token-expiring", "expires in"),
    ("no-key", "holds no certificate key"), ("key-expiring", "certificate key k8s-cp-1 issued"),
    ("worker-credential", "not for"), ("other-node", "not for"),
])
def test_joined_refuses_unusable_credentials(m, case, words):
    m["kubeadm.join_status"].return_value = NOT_JOINED
    if case == "no-token":
        m["mine.get"].return_value = {}
    elif case == "worker-credential":
        mine(m, role="worker")  # a worker's credential: never a control plane's
    elif case == "other-node":
        mine(m, node="k8s-cp-3.example.com", role="control_plane")
    else:
        mine(m, role="control_plane", left=10 if case == "token-expiring" else 1500,
             key_left=10 if case == "key-expiring" else 6000,
             key=False if case == "no-key" else None)
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443", role="control_plane")
    assert ret["result"] is False and words in ret["comment"], ret
    m["kubeadm.join"].assert_not_called()


def test_joined_reports_kubeadms_error(m):
    m["kubeadm.join_status"].return_value = NOT_JOINED
    mine(m)
    m["kubeadm.join"].side_effect = CommandExecutionError(
        "error execution phase preflight: couldn't validate the identity of the API Server: "
        'could not find a JWS signature in the cluster-info ConfigMap for token ID "abcdef"')
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443")
    assert ret["result"] is False and "JWS signature" in ret["comment"]


def test_joined_rejects_an_unknown_role(m):
    ret = states.joined("k8s-cp-1", api_server_endpoint="x:1", role="etcd")
    assert ret["result"] is False


# --- node_drained / node_absent / reset ------------------------------------------------------

def test_node_drained(m, test_mode):
    m["kos_kubectl.nodes"].side_effect = [{"w2": {"unschedulable": False}},
                                      {"w2": {"unschedulable": True}}]
    m["kos_kubectl.evictable_pods"].side_effect = [["default/web-1"], []]
    ret = states.node_drained("w2", timeout=60, kubeconfig="/a.conf")
    expect_applied(ret, test_mode)
    assert ret["changes"]["drained"]["old"] == {"schedulable": True, "pods": ["default/web-1"]}
    if test_mode:
        m["kos_kubectl.drain"].assert_not_called()
    else:
        m["kos_kubectl.drain"].assert_called_once_with("w2", timeout=60, kubeconfig="/a.conf")


def test_a_cordoned_node_with_pods_left_is_drained_again(m, test_mode):
    """A drain that timed out leaves the node cordoned: that is not drained."""
    m["kos_kubectl.nodes"].return_value = {"w2": {"unschedulable": True}}
    m["kos_kubectl.evictable_pods"].side_effect = [["default/redis-1"], []]
    ret = states.node_drained("w2", timeout=60)
    expect_applied(ret, test_mode)
    assert m["kos_kubectl.drain"].called is (not test_mode)


def test_a_drain_that_leaves_pods_fails(m):
    m["kos_kubectl.nodes"].return_value = {"w2": {"unschedulable": True}}
    m["kos_kubectl.evictable_pods"].return_value = ["default/redis-1"]
    ret = states.node_drained("w2", timeout=60)
    assert ret["result"] is False and "default/redis-1" in ret["comment"]


@pytest.mark.parametrize("nodes", [{}, {"w2": {"unschedulable": True}}], ids=["gone", "drained"])
def test_node_drained_nothing_to_do(m, nodes):
    m["kos_kubectl.nodes"].return_value = nodes
    ret = states.node_drained("w2")
    assert ret["result"] is True and ret["changes"] == {}


def test_node_absent(m, test_mode):
    m["kos_kubectl.nodes"].side_effect = [{"w2": {}}, {}]
    ret = states.node_absent("w2", kubeconfig="/a.conf")
    expect_applied(ret, test_mode)
    assert m["kos_kubectl.delete_node"].called is (not test_mode)


def test_node_absent_nothing_to_do(m):
    m["kos_kubectl.nodes"].return_value = {"w1": {}}
    assert states.node_absent("w2")["changes"] == {}


def test_etcd_member_absent(m, test_mode):
    url = "https://10.0.0.22:2380"
    m["kos_etcd.etcd_member_list"].return_value = [
        {"id": "a1", "name": "k8s-cp-1", "peer_urls": ["https://10.0.0.20:2380"]},
        {"id": "c3", "name": "k8s-cp-3", "peer_urls": [url]},
        {"id": "d4", "name": "", "peer_urls": [url]}]
    ret = states.etcd_member_absent("k8s-cp-3", peer_url=url, kube_dir="/k")
    expect_applied(ret, test_mode)
    assert ret["changes"] == {"etcd_members": {"old": ["c3", "d4"], "new": []}}
    if test_mode:
        m["kos_etcd.etcd_member_remove"].assert_not_called()
    else:
        m["kos_etcd.etcd_member_remove"].assert_called_once_with("k8s-cp-3", peer_url=url,
                                                                kube_dir="/k")


def test_etcd_member_absent_nothing_to_do_and_a_failure_named(m):
    m["kos_etcd.etcd_member_list"].return_value = [
        {"id": "a1", "name": "k8s-cp-1", "peer_urls": ["https://10.0.0.20:2380"]}]
    ret = states.etcd_member_absent("k8s-cp-3", peer_url="https://10.0.0.22:2380")
    assert (ret["result"], ret["changes"], ret["comment"]) == (True, {}, "k8s-cp-3 has no etcd member")
    m["kos_etcd.etcd_member_list"].side_effect = CommandExecutionError("context deadline exceeded")
    ret = states.etcd_member_absent("k8s-cp-3")
    assert ret["result"] is False and "context deadline exceeded" in ret["comment"]


def test_reset(m, test_mode, state_dir):
    state_dir.mkdir()
    (state_dir / "kubeadm-init.json").write_text("{}")
    m["kubeadm.has_local_files"].side_effect = [True, False]
    ret = states.reset("k8s-worker-2")
    expect_applied(ret, test_mode)
    if test_mode:
        m["kubeadm.reset"].assert_called_once_with(dry_run=True)
    else:
        m["kubeadm.reset"].assert_called_once_with()
    assert (state_dir / "kubeadm-init.json").exists() is test_mode


def test_a_reset_that_leaves_files_reports_that_it_ran(m):
    m["kubeadm.has_local_files"].return_value = True
    ret = states.reset("k8s-worker-2")
    assert ret["result"] is False and "still has its cluster files" in ret["comment"]
    assert ret["changes"] == {"cluster": {"old": "member", "new": "kubeadm reset ran"}}


def test_reset_nothing_to_do(m):
    m["kubeadm.has_local_files"].return_value = False
    ret = states.reset("k8s-worker-2")
    assert ret["result"] is True and ret["changes"] == {}
    m["kubeadm.reset"].assert_not_called()


def test_states_predict_on_a_node_without_kubeadm(m, tmp_path):
    """The packages come in the same highstate: a test run predicts instead of failing."""
    for name in [k for k in m if k.startswith("kubeadm.")]:
        del m[name]
    states.__opts__["test"] = True
    ret = states.initialized(str(tmp_path / "c.yaml"))
    assert ret["result"] is None and "once kubeadm is installed" in ret["comment"]
    ret = states.joined("k8s-cp-1", api_server_endpoint="127.0.0.1:7443")
    assert ret["result"] is None
    states.__opts__["test"] = False
    assert states.initialized(str(tmp_path / "c.yaml"))["result"] is False
