"""Unit tests of the kubeadm execution module: argument lists, parsing, secrets."""

import os

import pytest
import yaml
from salt.exceptions import CommandExecutionError

from tests.unit.modules import kubeadm_modules as loader
from tests.unit.modules.kubeadm_modules import MODULES, called_args, result

# the fixtures: every kubeadm-side module on one loader, as a minion loads them
kube_dir = loader.kube_dir
configure_loader_modules = loader.configure_loader_modules

kubeadm = MODULES["kubeadm"]

HINT = "To see the stack trace of this error execute with --v=5 or higher\n"
TOKEN = "abcdef.0123456789abcdef"
KEY = "a542b8308394773278da70ab0d11914f6e048fcd73524ecfef56b3633a39d3f1"


def assert_quiet(run_all):
    assert run_all.call_args.kwargs["output_loglevel"] == "quiet"
    assert run_all.call_args.kwargs["python_shell"] is False


def test_version(run_all):
    run_all.return_value = result("v1.31.4\n")
    assert kubeadm.version() == "v1.31.4"
    assert called_args(run_all) == ["kubeadm", "version", "-o", "short"]


def test_failure_raises_kubeadm_error_without_the_hint(run_all):
    stderr = ('error execution phase preflight: [preflight] Some fatal errors occurred:\n'
              '\t[ERROR Port-6443]: Port 6443 is in use\n' + HINT)
    run_all.return_value = result("[init] Using Kubernetes version: v1.31.4\n", 1, stderr)
    with pytest.raises(CommandExecutionError) as exc:
        kubeadm.init("/etc/kubernetes/kubeadm-config.yaml")
    assert "Port 6443 is in use" in str(exc.value)
    assert "stack trace" not in str(exc.value)
    assert exc.value.info["retcode"] == 1


def test_init_arguments_quiet_and_redacted(run_all):
    run_all.return_value = result(
        f"[upload-certs] Using certificate key:\n{KEY}\n[bootstrap-token] Using token: {TOKEN}\n"
    )
    out = kubeadm.init("/k/kubeadm-config.yaml", upload_certs=True,
                       ignore_preflight_errors=["Swap", "NumCPU"])
    assert called_args(run_all) == [
        "kubeadm", "init", "--config", "/k/kubeadm-config.yaml", "--upload-certs",
        "--ignore-preflight-errors=Swap,NumCPU",
    ]
    assert_quiet(run_all)
    assert KEY not in out and TOKEN not in out and "abcdef.<redacted>" in out


def test_a_wrong_ca_hash_error_keeps_the_hashes(run_all):
    actual = "sha256:" + "4" * 64
    run_all.return_value = result("", 1, "error execution phase preflight: couldn't validate the "
                                  "identity of the API Server: cluster CA found in cluster-info "
                                  f'ConfigMap is invalid: none of the public keys "{actual}" are '
                                  "pinned\n" + HINT)
    with pytest.raises(CommandExecutionError) as exc:
        kubeadm.join("127.0.0.1:7443", TOKEN, "sha256:" + "0" * 64)
    assert actual in str(exc.value)


def test_init_dry_run_removes_kubeadms_temporary_directory(run_all, kube_dir):
    tmp = kube_dir / "tmp" / "kubeadm-init-dryrun123456789"
    tmp.mkdir(parents=True)
    (tmp / "ca.crt").write_text("x")
    run_all.return_value = result(
        '[certs] Using certificateDir folder "/etc/kubernetes/tmp/kubeadm-init-dryrun123456789"\n'
    )
    kubeadm.init("/k/c.yaml", dry_run=True)
    assert called_args(run_all)[-1] == "--dry-run"
    assert not tmp.exists()


def get_args(kind, name, namespace, kubeconfig):
    args = ["kubectl", "--kubeconfig", str(kubeconfig), "get", kind, name, "-o", "name",
            "--ignore-not-found"]
    return args + ([f"--namespace={namespace}"] if namespace else [])


def test_init_status_is_the_api_and_the_objects_init_uploads_last(run_all, kube_dir):
    """The manifests alone are what an init that timed out leaves behind (kubeadm init's
    phase order, https://kubernetes.io/docs/reference/setup-tools/kubeadm/kubeadm-init/#init-workflow)."""
    assert kubeadm.init_status() == {"initialized": False, "started": False, "answers": False,
                                     "reason": "kubeadm init has not run here (no kube-apiserver "
                                               "manifest)"}
    run_all.assert_not_called()
    (kube_dir / "manifests").mkdir(parents=True)
    (kube_dir / "manifests" / "kube-apiserver.yaml").write_text("x")
    run_all.return_value = result("", 1, "The connection to the server 127.0.0.1:7443 was "
                                         "refused - did you specify the right host or port?")
    status = kubeadm.init_status()
    assert status["started"] and not status["answers"] and not status["initialized"]
    assert "127.0.0.1:7443 was refused" in status["reason"]
    assert not kubeadm.is_initialized()
    admin = kube_dir / "admin.conf"
    run_all.return_value = None
    run_all.side_effect = [result("configmap/kubeadm-config\n"), result("")]
    status = kubeadm.init_status()
    assert status["answers"] and not status["initialized"]
    assert "before bootstrap-token" in status["reason"]
    assert [c.args[0] for c in run_all.call_args_list[-2:]] == [
        get_args("configmap", "kubeadm-config", "kube-system", admin),
        get_args("configmap", "cluster-info", "kube-public", admin)]
    run_all.side_effect = [result(""), result("")]
    assert "before upload-config" in kubeadm.init_status()["reason"]
    run_all.side_effect = [result("configmap/kubeadm-config\n"), result("configmap/cluster-info\n")]
    assert kubeadm.is_initialized()


def test_join_status_of_a_control_plane_needs_its_etcd_member(run_all, kube_dir):
    """kubelet.conf is written in kubelet-start, before the etcd member is added (the join phases
    of https://github.com/kubernetes/kubernetes/blob/v1.31.0/cmd/kubeadm/app/cmd/join.go)."""
    status = kubeadm.join_status("k8s-cp-2", control_plane=True)
    assert not status["joined"] and not status["started"]
    run_all.assert_not_called()
    (kube_dir / "manifests").mkdir(parents=True)
    (kube_dir / "manifests" / "kube-apiserver.yaml").write_text("x")
    status = kubeadm.join_status("k8s-cp-2", control_plane=True)
    assert status["started"] and "before kubelet-start" in status["reason"]
    (kube_dir / "kubelet.conf").write_text("x")
    (kube_dir / "admin.conf").write_text("x")
    run_all.side_effect = [result("node/k8s-cp-2\n"), result("")]
    status = kubeadm.join_status("k8s-cp-2", control_plane=True)
    assert status["answers"] and not status["joined"]
    assert "runs no etcd member" in status["reason"]
    assert run_all.call_args.args[0] == get_args("pod", "etcd-k8s-cp-2", "kube-system",
                                                 kube_dir / "admin.conf")
    run_all.side_effect = [result("node/k8s-cp-2\n"), result("pod/etcd-k8s-cp-2\n")]
    assert kubeadm.is_joined("k8s-cp-2", control_plane=True)
    # external etcd: no member to look for
    run_all.side_effect = [result("node/k8s-cp-2\n")]
    assert kubeadm.is_joined("k8s-cp-2", control_plane=True, stacked_etcd=False)


def test_join_status_of_a_worker_asks_with_its_kubelet_credentials(run_all, kube_dir):
    (kube_dir / "pki").mkdir(parents=True)
    (kube_dir / "pki" / "ca.crt").write_text("x")
    status = kubeadm.join_status("k8s-worker-1")
    assert status["started"] and not status["joined"]
    (kube_dir / "kubelet.conf").write_text("x")
    run_all.return_value = result("")
    status = kubeadm.join_status("k8s-worker-1")
    assert status["answers"] and status["reason"] == "node k8s-worker-1 is not registered in " \
                                                     "the cluster"
    assert called_args(run_all) == get_args("node", "k8s-worker-1", None,
                                            kube_dir / "kubelet.conf")
    run_all.return_value = result("", 1, "Unable to connect to the server: EOF")
    status = kubeadm.join_status("k8s-worker-1")
    assert status["started"] and not status["answers"] and "EOF" in status["reason"]


def test_has_local_files(kube_dir):
    assert not kubeadm.has_local_files()
    (kube_dir / "manifests").mkdir(parents=True)
    (kube_dir / "manifests" / "kube-apiserver.yaml").write_text("x")
    assert kubeadm.has_local_files()


def test_join_writes_a_private_v1beta4_config_and_removes_it(run_all, monkeypatch):
    seen = {}

    def fake_run_all(cmd, **kwargs):
        path = cmd[cmd.index("--config") + 1]
        seen["mode"] = oct(os.stat(path).st_mode & 0o777)
        seen["doc"] = yaml.safe_load(open(path).read())
        seen["path"] = path
        seen["cmd"] = cmd
        return result("This node has joined the cluster:\n")

    run_all.side_effect = fake_run_all
    kubeadm.join("127.0.0.1:7443", TOKEN, "sha256:" + "a" * 64, control_plane=True,
                 certificate_key=KEY, node_name="k8s-cp-2", advertise_address="10.1.0.12",
                 bind_port=6443, cri_socket="unix:///var/run/containerd/containerd.sock",
                 kubelet_extra_args=[{"name": "cloud-provider", "value": "external"}],
                 discovery_timeout=300)
    assert seen["cmd"][:2] == ["kubeadm", "join"] and TOKEN not in " ".join(seen["cmd"])
    assert KEY not in " ".join(seen["cmd"])
    assert seen["mode"] == "0o600"
    assert not os.path.exists(seen["path"])
    assert_quiet(run_all)
    assert seen["doc"] == {
        "apiVersion": "kubeadm.k8s.io/v1beta4",
        "kind": "JoinConfiguration",
        "discovery": {"bootstrapToken": {"apiServerEndpoint": "127.0.0.1:7443", "token": TOKEN,
                                         "caCertHashes": ["sha256:" + "a" * 64]}},
        "nodeRegistration": {"name": "k8s-cp-2",
                             "criSocket": "unix:///var/run/containerd/containerd.sock",
                             "kubeletExtraArgs": [{"name": "cloud-provider", "value": "external"}]},
        "controlPlane": {"localAPIEndpoint": {"advertiseAddress": "10.1.0.12", "bindPort": 6443},
                         "certificateKey": KEY},
        "timeouts": {"discovery": "300s"},
    }


def test_join_worker_has_no_control_plane_section():
    doc = kubeadm.join_configuration("127.0.0.1:7443", TOKEN, "sha256:" + "b" * 64,
                                     kubelet_extra_args={"node-ip": "10.1.0.21"})
    assert "controlPlane" not in doc and "timeouts" not in doc
    assert doc["nodeRegistration"] == {"kubeletExtraArgs": [{"name": "node-ip",
                                                             "value": "10.1.0.21"}]}


def test_join_failure_is_redacted_and_the_file_still_removed(run_all, tmp_path):
    paths = []

    def fake_run_all(cmd, **kwargs):
        paths.append(cmd[cmd.index("--config") + 1])
        return result("[preflight] Running pre-flight checks\n", 1,
                      "error execution phase preflight: couldn't validate the identity of the API "
                      'Server: could not find a JWS signature in the cluster-info ConfigMap for '
                      f'token ID "abcdef" ({TOKEN})\n' + HINT)

    run_all.side_effect = fake_run_all
    with pytest.raises(CommandExecutionError, match="could not find a JWS signature") as exc:
        kubeadm.join("127.0.0.1:7443", TOKEN, "sha256:" + "a" * 64)
    assert TOKEN not in str(exc.value)
    assert not os.path.exists(paths[0])


def test_reset_is_forced_and_never_waits_for_an_answer(run_all):
    kubeadm.reset()
    assert called_args(run_all) == ["kubeadm", "reset", "--force"]
    assert run_all.call_args.kwargs["stdin"] == ""
    kubeadm.reset(dry_run=True)
    assert called_args(run_all) == ["kubeadm", "reset", "--force", "--dry-run"]


