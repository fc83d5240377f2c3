"""Unit tests of the kos_certs execution module: kubeadm's certificate report, renewal and
the control-plane restart that loads renewed certificates."""

import datetime

import pytest
from salt.exceptions import CommandExecutionError

from tests.unit.modules import kubeadm_modules as loader
from tests.unit.modules.kubeadm_modules import MODULES, called_args, result

# the fixtures: every kubeadm-side module on one loader, as a minion loads them
kube_dir = loader.kube_dir
configure_loader_modules = loader.configure_loader_modules

kos_certs = MODULES["kos_certs"]



# `kubeadm certs check-expiration` on a joined control plane (super-admin.conf exists only
# where init ran; https://kubernetes.io/docs/tasks/administer-cluster/kubeadm/kubeadm-certs/).
CHECK_EXPIRATION = (
    '[check-expiration] Reading configuration from the "kubeadm-config" ConfigMap in namespace '
    '"kube-system"...\n'
    "[check-expiration] Use 'kubeadm init phase upload-config kubeadm --config your-config-file' "
    "to re-upload it.\n\n"
    "CERTIFICATE                  EXPIRES                  RESIDUAL TIME   CERTIFICATE AUTHORITY"
    "   EXTERNALLY MANAGED\n"
    "admin.conf                   Jan 23, 2027 10:41 UTC   364d            ca                  "
    "    no      \n"
    "apiserver                    Jan 02, 2026 09:00 UTC   <invalid>       ca                  "
    "    no      \n"
    "apiserver-etcd-client        Jan 23, 2027 10:41 UTC   364d            etcd-ca             "
    "    no      \n"
    "front-proxy-client           Jan 23, 2027 10:41 UTC   364d            front-proxy-ca      "
    "    yes     \n"
    "!MISSING! super-admin.conf                                                             "
    "       \n"
    "\n"
    "CERTIFICATE AUTHORITY   EXPIRES                  RESIDUAL TIME   EXTERNALLY MANAGED\n"
    "ca                      Jan 21, 2036 10:41 UTC   9y              no      \n"
    "front-proxy-ca          Jan 21, 2036 10:41 UTC   9y              yes     \n"
)


def test_certificates_from_check_expiration(run_all, kube_dir, monkeypatch):
    now = datetime.datetime(2026, 1, 24, 10, 41, tzinfo=datetime.timezone.utc).timestamp()
    monkeypatch.setattr(kos_certs.time, "time", lambda: now)
    run_all.return_value = result(CHECK_EXPIRATION)
    found = kos_certs.certificates()
    assert called_args(run_all) == [
        "kubeadm", "certs", "check-expiration", "--cert-dir", str(kube_dir / "pki"),
        "--kubeconfig", str(kube_dir / "admin.conf")]
    certs, cas = found["certificates"], found["authorities"]
    assert list(certs) == ["admin.conf", "apiserver", "apiserver-etcd-client",
                           "front-proxy-client", "super-admin.conf"]
    jan23 = datetime.datetime(2027, 1, 23, 10, 41, tzinfo=datetime.timezone.utc).timestamp()
    assert certs["admin.conf"] == {"expires": jan23, "days": 364, "authority": "ca",
                                   "externally_managed": False}
    # expired: negative days, whatever the residual column says
    assert certs["apiserver"]["days"] == -23
    assert certs["apiserver-etcd-client"]["authority"] == "etcd-ca"
    assert certs["front-proxy-client"]["externally_managed"] is True
    assert certs["super-admin.conf"] is None
    assert cas["ca"]["days"] == 3649 and "authority" not in cas["ca"]
    assert cas["front-proxy-ca"]["externally_managed"] is True


def test_certificates_refuses_an_unreadable_table(run_all):
    run_all.return_value = result("CERTIFICATE   EXPIRES\nadmin.conf   soon\n\n"
                                  "CERTIFICATE AUTHORITY   EXPIRES\n")
    with pytest.raises(CommandExecutionError, match="unreadable kubeadm certs"):
        kos_certs.certificates()
    run_all.return_value = result("[check-expiration] Error reading configuration\n")
    with pytest.raises(CommandExecutionError, match="printed no tables"):
        kos_certs.certificates()


def test_renew_certificates_returns_what_kubeadm_renewed(run_all, kube_dir):
    run_all.return_value = result(
        "[renew] Reading configuration from the \"kubeadm-config\" ConfigMap...\n\n"
        "certificate for serving the Kubernetes API renewed\n"
        "MISSING! certificate embedded in the kubeconfig file for the super-admin\n"
        "Detected external etcd-ca, certificate for serving etcd can't be renewed\n\n"
        "Done renewing certificates. You must restart the kube-apiserver, "
        "kube-controller-manager, kube-scheduler and etcd, so that they can use the new "
        "certificates.\n")
    assert kos_certs.renew_certificates() == ["apiserver"]
    assert called_args(run_all)[:4] == ["kubeadm", "certs", "renew", "all"]


def test_restart_control_plane_puts_every_manifest_back(run_all, kube_dir):
    manifests = kube_dir / "manifests"
    manifests.mkdir(parents=True)
    for name in ("etcd.yaml", "kube-apiserver.yaml"):
        (manifests / name).write_text(name)
    seen = []

    def version(args, **kwargs):
        seen.append(sorted(p.name for p in manifests.iterdir()))
        return result('{"serverVersion": {"gitVersion": "v1.31.4"}}')

    run_all.side_effect = version
    assert kos_certs.restart_control_plane(wait=0, timeout=1) == ["etcd.yaml", "kube-apiserver.yaml"]
    assert seen == [["etcd.yaml", "kube-apiserver.yaml"]]  # back before the API is asked
    assert sorted(p.name for p in kube_dir.iterdir()) == ["manifests"]  # no leftover


def test_restart_control_plane_fails_when_the_api_stays_away(run_all, kube_dir, monkeypatch):
    (kube_dir / "manifests").mkdir(parents=True)
    (kube_dir / "manifests" / "etcd.yaml").write_text("x")
    run_all.return_value = result("", 1, "The connection to the server was refused\n")
    monkeypatch.setattr(kos_certs.time, "sleep", lambda s: None)
    with pytest.raises(CommandExecutionError, match="did not answer within 0 s"):
        kos_certs.restart_control_plane(wait=0, timeout=0)
    assert (kube_dir / "manifests" / "etcd.yaml").exists()
