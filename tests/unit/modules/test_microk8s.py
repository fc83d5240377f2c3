"""Unit tests of the microk8s execution modules (``microk8s``, ``microk8s_addons``,
``microk8s_certs``, ``microk8s_backup``): argument lists, parsing, secrets."""

import json
import os
import re
from unittest.mock import create_autospec

import pytest
import salt.modules.config
import salt.modules.pillar
from salt.exceptions import CommandExecutionError

from tests.standins.microk8s_outputs import FRESH_YAML_START, NOT_RUNNING_YAML
from tests.unit.modules import microk8s_modules as loader
from tests.unit.conftest import load
from tests.unit.modules.microk8s_modules import MODULES, called_args, result

# the fixtures: every microk8s module on one loader, as a minion loads them
configure_loader_modules = loader.configure_loader_modules

microk8s = MODULES["microk8s"]
addons = MODULES["microk8s_addons"]
certs = MODULES["microk8s_certs"]
backups = MODULES["microk8s_backup"]
snap = load("modules", "snap")


# `microk8s status --format yaml` of a fresh 1.31 node, shortened to three addons.
FRESH_YAML = FRESH_YAML_START + """\
  - name: community
    repository: core
    description: The community addons repository
    version:  
    status: disabled
  - name: registry
    repository: core
    description: Private image registry exposed on localhost:32000
    version: 2.8.1
    status: disabled
"""


def test_status_parses_yaml_and_is_cached(run_all):
    run_all.return_value = result(FRESH_YAML)
    st = microk8s.status()
    assert called_args(run_all) == ["microk8s", "status", "--format", "yaml"]
    assert run_all.call_args.kwargs["python_shell"] is False
    assert st["running"] is True and st["worker"] is False
    assert st["high_availability"]["nodes"] == [{"address": "127.0.0.1:19001", "role": "voter"}]
    assert addons.addons() == {"dns": "enabled", "community": "disabled", "registry": "disabled"}
    assert st["addons"]["community"]["version"] is None
    assert run_all.call_count == 1  # addons() reused the cached status


def test_status_not_ready_is_exit_1_with_message(run_all):
    run_all.return_value = result(NOT_RUNNING_YAML, retcode=1)
    st = microk8s.status()
    assert st["running"] is False
    assert st["message"].startswith("microk8s is not running")


def test_status_on_a_worker(run_all):
    run_all.return_value = result(
        "This MicroK8s deployment is acting as a node in a cluster.\nPlease use the control plane node.\n"
    )
    st = microk8s.status()
    assert st["worker"] is True and microk8s.is_worker() and microk8s.is_clustered()


# What a stopped control plane's datastore keeps (go-dqlite's YAML node store).
CLUSTER_YAML = """- Address: 10.1.0.11:19001
  ID: 3297041220608546238
  Role: 0
- Address: 10.1.0.12:19001
  ID: 8129302942217543012
  Role: 2
"""


def stopped_node(run_all, tmp_path, members=None):
    run_all.return_value = result("microk8s is not running, try microk8s start\n")
    backend = tmp_path / "var" / "kubernetes" / "backend"
    backend.mkdir(parents=True)
    if members is not None:
        (backend / "cluster.yaml").write_text(members)
    return str(tmp_path)


def test_a_stopped_control_plane_is_judged_by_the_members_it_last_knew(run_all, tmp_path):
    """`microk8s status` on a stopped node lists no member: that is no sign it is alone."""
    snap_data = stopped_node(run_all, tmp_path, CLUSTER_YAML)
    assert microk8s.status()["stopped"] is True
    assert microk8s.cluster_members(snap_data) == [
        {"address": "10.1.0.11:19001", "role": "voter"},
        {"address": "10.1.0.12:19001", "role": "spare"}]
    assert microk8s.is_clustered(snap_data) is True


def test_a_stopped_node_alone_is_not_clustered(run_all, tmp_path):
    snap_data = stopped_node(run_all, tmp_path, CLUSTER_YAML.split("- Address: 10.1.0.12")[0])
    assert microk8s.is_clustered(snap_data) is False


@pytest.mark.parametrize("members", [None, "", "not: a list\n"], ids=["missing", "empty", "other"])
def test_a_stopped_node_whose_members_cannot_be_read_cannot_tell(run_all, tmp_path, members):
    snap_data = stopped_node(run_all, tmp_path, members)
    with pytest.raises(CommandExecutionError, match=r"cannot be told: start it \(microk8s start\)"):
        microk8s.is_clustered(snap_data)


def test_status_wait_ready_with_timeout_zero_keeps_the_flag(run_all):
    run_all.return_value = result(FRESH_YAML)
    microk8s.status(wait_ready=True, timeout=0)
    assert called_args(run_all) == ["microk8s", "status", "--format", "yaml", "--wait-ready", "--timeout", "0"]


def test_add_node_passes_ttl_and_never_logs(run_all):
    run_all.return_value = result(json.dumps({"token": "t" * 32 + "/abcdefabcdef", "urls": ["10.1.0.11:25000/x/y"]}))
    data = microk8s.add_node(ttl=3600)
    assert called_args(run_all) == ["microk8s", "add-node", "--format", "json", "--token-ttl", "3600"]
    assert run_all.call_args.kwargs["output_loglevel"] == "quiet"
    assert data["expires"] > 0 and data["urls"] == ["10.1.0.11:25000/x/y"]


def test_add_node_ttl_zero_survives(run_all):
    run_all.return_value = result(json.dumps({"token": "x", "urls": []}))
    microk8s.add_node(ttl=0)
    assert called_args(run_all)[-2:] == ["--token-ttl", "0"]


def test_join_worker_quiet_and_failure_message(run_all):
    run_all.return_value = result("Contacting cluster at 10.1.0.11\nConnection failed. Invalid token (500).\n", retcode=6)
    with pytest.raises(CommandExecutionError, match=r"Invalid token \(500\)") as exc:
        microk8s.join("10.1.0.11:25000/" + "a" * 32 + "/abcdefabcdef", worker=True)
    assert called_args(run_all) == ["microk8s", "join", "10.1.0.11:25000/" + "a" * 32 + "/abcdefabcdef", "--worker"]
    assert run_all.call_args.kwargs["output_loglevel"] == "quiet"
    assert exc.value.info["retcode"] == 6


def test_disable_hostpath_storage_keeps_data_and_accepts_the_unanswered_prompt(run_all):
    run_all.return_value = result("Remove PVC storage at ... ? (Y/N): ", retcode=1)
    addons.disable_addon("hostpath-storage")
    assert called_args(run_all) == ["microk8s", "disable", "hostpath-storage"]
    # With destroy_storage nothing is asked, so exit 1 is a real failure.
    with pytest.raises(CommandExecutionError):
        addons.disable_addon("hostpath-storage", destroy_storage=True)
    run_all.return_value = result("Storage space reclaimed.")
    addons.disable_addon("hostpath-storage", destroy_storage=True)
    assert called_args(run_all) == ["microk8s", "disable", "hostpath-storage:destroy-storage"]


def test_disable_ha_cluster_force(run_all):
    addons.disable_addon("ha-cluster", force=True)
    assert called_args(run_all) == ["microk8s", "disable", "ha-cluster", "--force"]


def test_enable_addon_args_and_cache_dropped(run_all):
    run_all.return_value = result(FRESH_YAML)
    microk8s.status()
    run_all.return_value = result("MetalLB is enabled")
    addons.enable_addon("metallb", args=["10.0.0.240-10.0.0.250"])
    assert called_args(run_all) == ["microk8s", "enable", "metallb", "10.0.0.240-10.0.0.250"]
    assert "microk8s.status" not in addons.__context__


def test_failure_raises_with_the_cli_text(run_all):
    run_all.return_value = result("", retcode=1, stderr="Addon foo was not found in any repository")
    with pytest.raises(CommandExecutionError, match="was not found in any repository"):
        addons.enable_addon("foo")


def test_remove_node_and_refresh_certs_args(run_all):
    microk8s.remove_node("k8s-worker-2", force=True)
    assert called_args(run_all) == ["microk8s", "remove-node", "k8s-worker-2", "--force"]
    certs.refresh_certs()
    assert called_args(run_all) == ["microk8s", "refresh-certs", "--cert", "server.crt"]
    microk8s.leave()
    assert called_args(run_all) == ["microk8s", "leave"]


def test_version(run_all):
    run_all.return_value = result("MicroK8s v1.31.9 revision 8148\n")
    assert microk8s.version() == {"version": "v1.31.9", "revision": "8148"}


def test_nodes_from_kubectl(run_all):
    doc = {"items": [
        {"metadata": {"name": "cp1", "labels": {"node.kubernetes.io/microk8s-controlplane": "microk8s-controlplane"}},
         "status": {"addresses": [{"type": "InternalIP", "address": "10.1.0.11"}],
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "nodeInfo": {"kubeletVersion": "v1.31.9"}}},
        {"metadata": {"name": "w1", "labels": {"node.kubernetes.io/microk8s-worker": "microk8s-worker"}},
         "spec": {"unschedulable": True},
         "status": {"addresses": [{"type": "InternalIP", "address": "10.1.0.12"}],
                    "conditions": [{"type": "Ready", "status": "False"}]}},
        {"metadata": {"name": "w2", "labels": {"node.kubernetes.io/microk8s-worker": "microk8s-worker"}},
         "spec": {"podCIDR": "10.1.2.0/24"},
         "status": {"addresses": [{"type": "InternalIP", "address": "10.1.0.13"}],
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "nodeInfo": {"kubeletVersion": "v1.31.9"}}},
    ]}
    run_all.return_value = result(json.dumps(doc))
    assert microk8s.nodes() == {
        "cp1": {"ready": True, "role": "control-plane", "ip": "10.1.0.11", "version": "v1.31.9",
                "unschedulable": False},
        "w1": {"ready": False, "role": "worker", "ip": "10.1.0.12", "version": None,
               "unschedulable": True},
        "w2": {"ready": True, "role": "worker", "ip": "10.1.0.13", "version": "v1.31.9",
               "unschedulable": False},
    }
    assert called_args(run_all) == ["microk8s", "kubectl", "get", "nodes", "-o", "json"]


def test_token_valid_reads_the_agent_files(tmp_path, monkeypatch):
    creds = tmp_path / "credentials"
    creds.mkdir()
    (creds / "cluster-tokens.txt").write_text(f"{'a' * 32}\n{'b' * 32}|{2**40}\n{'c' * 32}|1\n")
    assert microk8s.token_valid("a" * 32, str(tmp_path))
    assert microk8s.token_valid("b" * 32, str(tmp_path))
    assert not microk8s.token_valid("c" * 32, str(tmp_path))  # expired
    assert not microk8s.token_valid("d" * 32, str(tmp_path))


def make_cert(path, sans):
    """A self-signed certificate with ``sans`` (x509 GeneralNames), written as PEM."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(key, hashes.SHA256()))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def test_server_sans_read_the_certificate(tmp_path):
    import ipaddress

    from cryptography import x509

    make_cert(tmp_path / "certs" / "server.crt", [
        x509.DNSName("kubernetes"), x509.DNSName("Cafe"),
        x509.IPAddress(ipaddress.ip_address("203.0.113.10")),
        x509.IPAddress(ipaddress.ip_address("2001:db8::1"))])
    assert certs.server_sans(str(tmp_path)) == {"ip": ["203.0.113.10", "2001:db8::1"],
                                                   "dns": ["kubernetes", "cafe"]}
    with pytest.raises(CommandExecutionError, match="cannot read"):
        certs.server_sans(str(tmp_path / "nowhere"))


def test_remove_token_takes_only_its_line(tmp_path):
    creds = tmp_path / "credentials"
    creds.mkdir()
    path = creds / "cluster-tokens.txt"
    path.write_text("a" * 32 + "|1900000000\n" + "b" * 32 + "|1900000000\n" + "c" * 32 + "\n")
    path.chmod(0o600)
    assert microk8s.remove_token("b" * 32, str(tmp_path)) is True
    assert path.read_text() == "a" * 32 + "|1900000000\n" + "c" * 32 + "\n"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert microk8s.remove_token("b" * 32, str(tmp_path)) is False


def test_certificates_from_refresh_certs_check(run_all):
    # `refresh-certs --check` prints three lines, whole days, negative once expired
    # (https://microk8s.io/docs/command-reference#heading--microk8s-refresh-certs)
    run_all.return_value = result("The CA certificate will expire in 3649 days.\n"
                                  "The server certificate will expire in -3 days.\n"
                                  "The front proxy client certificate will expire in 364 days.\n")
    assert certs.certificates() == {"ca.crt": 3649, "server.crt": -3,
                                       "front-proxy-client.crt": 364}
    assert called_args(run_all) == ["microk8s", "refresh-certs", "--check"]


def test_certificates_on_a_worker_are_none(run_all):
    run_all.return_value = result(
        "This MicroK8s deployment is acting as a node in a cluster. Please use the microk8s "
        "refresh-certs command on the master\nand then return to this node to perform a "
        "microk8s leave and re-join.\n")
    assert certs.certificates() == {}


def test_certificates_refuses_what_it_cannot_read(run_all):
    run_all.return_value = result("The CA certificate will expire in 3649 days.\n")
    with pytest.raises(CommandExecutionError, match="refresh-certs --check printed"):
        certs.certificates()


# `microk8s kubectl` on a node that joined as a worker, exit 0:
# https://github.com/canonical/microk8s/blob/master/microk8s-resources/wrappers/microk8s-kubectl.wrapper
KUBECTL_ON_A_WORKER = ("This MicroK8s deployment is acting as a node in a cluster. "
                       "Please use the microk8s kubectl on the master.\n")


# A successful `kubectl drain` (a real v1.34.3 run, node renamed): cordoned, each eviction,
# drained, as pkg/cmd/drain/drain.go and pkg/drain/drain.go of
# https://github.com/kubernetes/kubectl/tree/v0.31.0 print them
DRAINED_OUT = ("node/k8s-worker-1 cordoned\n"
               "evicting pod kube-system/calico-kube-controllers-7498b9bb4c-4zzpx\n"
               "pod/calico-kube-controllers-7498b9bb4c-4zzpx evicted\n"
               "node/k8s-worker-1 drained\n")


DRAINED_ERR = ("Warning: ignoring DaemonSet-managed Pods: kube-system/calico-node-tmnqj, "
               "kube-system/kube-proxy-k7jpn\n")


# A Pod without controller, refused as
# https://github.com/kubernetes/kubectl/blob/v0.31.0/pkg/drain/filters.go says; the first line
# on stdout, the rest on stderr.
REFUSED_ERR = (
    'error: unable to drain node "k8s-worker-1" due to error: cannot delete cannot delete Pods '
    "that declare no controller (use --force to override): default/zingaboom, continuing "
    "command...\nThere are pending nodes to be drained:\n k8s-worker-1\ncannot delete cannot "
    "delete Pods that declare no controller (use --force to override): default/zingaboom\n")


# A PodDisruptionBudget keeps the Pod until --timeout ("global timeout reached",
# https://github.com/kubernetes/kubectl/blob/v0.31.0/pkg/drain/drain.go).
TIMED_OUT_OUT = ("node/k8s-worker-1 cordoned\nevicting pod default/redis-1\n"
                 "evicting pod default/redis-1\n"
                 'There are pending pods in node "k8s-worker-1" when an error occurred: error '
                 'when evicting pods/"redis-1" -n "default": global timeout reached: 5m0s\n'
                 "pod/redis-1\n")


TIMED_OUT_ERR = (
    'error when evicting pods/"redis-1" -n "default" (will retry after 5s): Cannot evict pod '
    "as it would violate the pod's disruption budget.\n"
    'error: unable to drain node "k8s-worker-1" due to error: error when evicting '
    'pods/"redis-1" -n "default": global timeout reached: 5m0s, continuing command...\n'
    "There are pending nodes to be drained:\n k8s-worker-1\n"
    'error when evicting pods/"redis-1" -n "default": global timeout reached: 5m0s\n')


def test_cordon_and_uncordon_args(run_all):
    run_all.return_value = result("node/k8s-worker-1 cordoned\n")
    assert microk8s.cordon("k8s-worker-1") == "node/k8s-worker-1 cordoned"
    assert called_args(run_all) == ["microk8s", "kubectl", "cordon", "k8s-worker-1"]
    assert run_all.call_args.kwargs["python_shell"] is False
    run_all.return_value = result("node/k8s-worker-1 already uncordoned\n")
    assert microk8s.uncordon("k8s-worker-1") == "node/k8s-worker-1 already uncordoned"
    assert called_args(run_all) == ["microk8s", "kubectl", "uncordon", "k8s-worker-1"]
    assert run_all.call_count == 2


@pytest.mark.parametrize("timeout, extra", [
    (None, []), (300, ["--timeout=300s"]), ("120", ["--timeout=120s"]), (90.0, ["--timeout=90s"]),
])
def test_drain_args(run_all, timeout, extra):
    run_all.return_value = result(DRAINED_OUT, stderr=DRAINED_ERR)
    assert microk8s.drain("k8s-worker-1", timeout=timeout) == DRAINED_OUT.strip()
    assert called_args(run_all) == ["microk8s", "kubectl", "drain", "k8s-worker-1",
                                    "--ignore-daemonsets", "--delete-emptydir-data", *extra]
    assert run_all.call_args.kwargs["python_shell"] is False
    assert run_all.call_count == 1


def test_drain_refuses_a_timeout_kubectl_reads_as_for_ever(run_all):
    with pytest.raises(CommandExecutionError, match="at least 1 s"):
        microk8s.drain("k8s-worker-1", timeout=0)
    assert run_all.call_count == 0


def test_drain_without_timeout_passes_no_timeout_flag(run_all):
    run_all.return_value = result(DRAINED_OUT)
    microk8s.drain("k8s-worker-1")
    assert not [a for a in called_args(run_all) if a.startswith("--timeout")]


@pytest.mark.parametrize("stdout, stderr, words", [
    ("node/k8s-worker-1 cordoned\n", REFUSED_ERR,
     "cannot delete Pods that declare no controller (use --force to override)"),
    (TIMED_OUT_OUT, TIMED_OUT_ERR, "global timeout reached: 5m0s"),
    ("", 'Error from server (NotFound): nodes "k8s-worker-1" not found\n',
     'nodes "k8s-worker-1" not found'),
], ids=["refused", "timed-out", "unknown-node"])
def test_drain_failure_raises_with_kubectls_text(run_all, stdout, stderr, words):
    run_all.return_value = result(stdout, retcode=1, stderr=stderr)
    with pytest.raises(CommandExecutionError) as exc:
        microk8s.drain("k8s-worker-1", timeout=300)
    assert words in str(exc.value)
    assert str(exc.value).startswith(stderr.strip().splitlines()[0])  # stderr first
    assert exc.value.info["retcode"] == 1


def test_uncordon_of_an_unknown_node_raises(run_all):
    run_all.return_value = result(
        "", retcode=1, stderr='Error from server (NotFound): nodes "k8s-worker-9" not found\n')
    with pytest.raises(CommandExecutionError, match='nodes "k8s-worker-9" not found'):
        microk8s.uncordon("k8s-worker-9")
    assert called_args(run_all) == ["microk8s", "kubectl", "uncordon", "k8s-worker-9"]


@pytest.mark.parametrize("call", [
    lambda: microk8s.cordon("k8s-worker-1"),
    lambda: microk8s.uncordon("k8s-worker-1"),
    lambda: microk8s.drain("k8s-worker-1", timeout=300),
], ids=["cordon", "uncordon", "drain"])
def test_node_commands_on_a_worker_raise(run_all, call):
    """kubectl exits 0 there without running: that is no success."""
    run_all.return_value = result(KUBECTL_ON_A_WORKER)
    with pytest.raises(CommandExecutionError, match="this node is a worker"):
        call()
    assert called_args(run_all)[:2] == ["microk8s", "kubectl"]


@pytest.fixture
def facts_salt(setup_loader_mock, tmp_path):
    """snap, pillar and config functions upgrade_facts asks, with kos:state_dir in tmp_path."""
    config = {"kos:state_dir": str(tmp_path)}
    fns = {
        "snap.list": create_autospec(snap.list_, return_value={}),
        "snap.held": create_autospec(snap.held, return_value=False),
        "pillar.items": create_autospec(salt.modules.pillar.items, return_value={}),
        "config.get": create_autospec(salt.modules.config.get,
                                      side_effect=lambda k, d="": config.get(k, d)),
    }
    microk8s.__salt__.update(fns)
    return fns


def test_upgrade_facts(facts_salt, tmp_path, run_all):
    facts_salt["snap.list"].return_value = {"microk8s": {
        "version": "v1.31.9", "rev": "8148", "tracking": "1.31/stable", "publisher": "canonical",
        "notes": "classic,held"}}
    facts_salt["snap.held"].return_value = True
    facts_salt["pillar.items"].return_value = {"microk8s": {"channel": "1.32/stable"},
                                               "kos": {"distribution": "microk8s"}}
    (tmp_path / "upgrade-pending.json").write_text(
        json.dumps({"channel": "1.32/stable", "cordoned": True}))
    assert microk8s.upgrade_facts() == {
        "tracking": "1.31/stable", "version": "v1.31.9", "revision": "8148", "held": True,
        "channel": "1.32/stable", "pending": "1.32/stable", "pending_cordoned": True}
    facts_salt["snap.list"].assert_called_once_with("microk8s")
    facts_salt["snap.held"].assert_called_once_with("microk8s")
    facts_salt["pillar.items"].assert_called_once_with(unmask=True)  # compiled afresh, not __pillar__
    facts_salt["config.get"].assert_any_call("kos:state_dir", "/etc/kos")
    run_all.assert_not_called()


def test_upgrade_facts_of_a_node_with_nothing_to_say(facts_salt, tmp_path):
    """No snap, no microk8s:channel in pillar, no upgrade pending."""
    assert microk8s.upgrade_facts() == {
        "tracking": None, "version": None, "revision": None, "held": False,
        "channel": None, "pending": None, "pending_cordoned": False}


def test_upgrade_facts_ignores_an_unreadable_pending_note(facts_salt, tmp_path):
    facts_salt["pillar.items"].return_value = {"microk8s": None}
    (tmp_path / "upgrade-pending.json").write_text("{not json")
    facts = microk8s.upgrade_facts()
    assert facts["pending"] is None and facts["channel"] is None


DBCTL_NOT_RUNNING = "Please ensure the kubernetes apiserver is running and HA is enabled.\n"


TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/snap/microk8s/8148/scripts/wrappers/dbctl.py", line 160, in <module>\n'
    "    restore(fname, args.debug)\n"
    "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/x.tar.gz'\n"
)


def _writes_archive(size, seen):
    """A cmd.run_all that writes a `size`-byte archive where `-o` points, as dbctl does."""

    def run(cmd, **kwargs):
        path = cmd[cmd.index("-o") + 1]
        seen["umask"] = os.umask(0o022)
        os.umask(seen["umask"])
        with open(path, "wb") as fh:
            fh.write(b"\x1f\x8b" + b"x" * (size - 2))
        return result("Backing up the datastore\nThe backup is: {}\n".format(path))

    return run


def test_backup_args_name_mode_and_result(run_all, tmp_path):
    seen = {}
    run_all.side_effect = _writes_archive(4096, seen)
    directory = tmp_path / "backups"
    taken = backups.backup(str(directory))
    args = called_args(run_all)
    assert args[:4] == ["microk8s", "dbctl", "backup", "-o"] and len(args) == 5
    assert re.fullmatch(re.escape(str(directory)) + r"/microk8s-k8s-cp-1-\d{8}T\d{6}Z\.tar\.gz", args[4])
    assert run_all.call_args.kwargs["python_shell"] is False
    assert seen["umask"] == 0o077
    assert set(taken) == {"path", "name", "key_file", "size", "revision", "keys", "hash"}
    assert taken["path"] == args[4]
    assert taken["name"] == os.path.basename(args[4])[: -len(".tar.gz")]
    assert taken["key_file"] == "/var/snap/microk8s/current/certs/ca.key"
    assert taken["size"] == 4096
    assert (taken["revision"], taken["keys"], taken["hash"]) == (None, None, None)
    assert directory.stat().st_mode & 0o777 == 0o700
    assert os.stat(taken["path"]).st_mode & 0o777 == 0o600


def test_backup_refuses_and_removes_an_empty_archive(run_all, tmp_path):
    run_all.side_effect = _writes_archive(200, {})
    with pytest.raises(CommandExecutionError, match=r"empty archive \(200 bytes, removed\).*4259"):
        backups.backup(str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_backup_that_wrote_nothing_raises(run_all, tmp_path):
    run_all.return_value = result("Backing up the datastore\nThe backup is: x.tar.gz\n")
    with pytest.raises(CommandExecutionError, match="reported success but wrote no"):
        backups.backup(str(tmp_path))


@pytest.mark.parametrize(
    "res, words",
    [
        (result(DBCTL_NOT_RUNNING, retcode=10), "Please ensure the kubernetes apiserver is running and HA is enabled."),
        (
            result(
                "This MicroK8s deployment is acting as a node in a cluster.\nPlease use the master node.\n", retcode=1
            ),
            "This MicroK8s deployment is acting as a node in a cluster.\nPlease use the master node.",
        ),
        (result("Backing up the datastore\nBackup process failed. 1\n", retcode=1),
         "Backing up the datastore\nBackup process failed. 1"),
    ],
)
def test_backup_failure_raises_with_the_cli_text(run_all, tmp_path, res, words):
    run_all.return_value = res
    with pytest.raises(CommandExecutionError) as exc:
        backups.backup(str(tmp_path / "b"))
    assert exc.value.error == words
    assert list((tmp_path / "b").iterdir()) == []


def test_restore_from_args_and_cache_dropped(run_all):
    backups.__context__["microk8s.status"] = {"cached": True}
    run_all.return_value = result("Restoring from /tmp/x.tar.gz\n")
    assert backups.restore_from("/tmp/x.tar.gz") is True
    assert called_args(run_all) == ["microk8s", "dbctl", "restore", "/tmp/x.tar.gz"]
    assert run_all.call_args.kwargs["python_shell"] is False
    assert "microk8s.status" not in backups.__context__


@pytest.mark.parametrize(
    "res, words",
    [
        (result(DBCTL_NOT_RUNNING, retcode=10), "Please ensure the kubernetes apiserver is running and HA is enabled."),
        (result("Restoring from /tmp/x.tar.gz\nRestore process failed. 1\n", retcode=3),
         "Restoring from /tmp/x.tar.gz\nRestore process failed. 1"),
        # a missing or unreadable archive: a traceback, of which only the exception is kept
        (result("Restoring from /tmp/x.tar.gz\n", retcode=1, stderr=TRACEBACK),
         "FileNotFoundError: [Errno 2] No such file or directory: '/tmp/x.tar.gz'\nRestoring from /tmp/x.tar.gz"),
    ],
)
def test_restore_from_failure_raises_with_the_cli_text(run_all, res, words):
    run_all.return_value = res
    with pytest.raises(CommandExecutionError) as exc:
        backups.restore_from("/tmp/x.tar.gz")
    assert exc.value.error == words
