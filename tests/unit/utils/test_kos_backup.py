"""Unit tests of datastore backups: sealing (saltext.kos.utils.kos_backup), the kos_etcd module's
snapshot and restore steps, kos.backup and the master's filing state; and the
etcd membership of a control plane that is gone (the same etcd tools)."""

import json
import os
import shutil
from pathlib import Path

import pytest
import salt.modules.cmdmod
import yaml
from salt.exceptions import CommandExecutionError
from unittest.mock import create_autospec

from tests.unit.conftest import load
from saltext.kos.utils import kos_backup

kos_etcd = load("modules", "kos_etcd")
kos_mod = load("modules", "kos")
kos_state = load("states", "kos")
IMAGE = "registry.k8s.io/etcd:3.5.15-0"


def result(stdout="", retcode=0, stderr=""):
    return {"stdout": stdout, "stderr": stderr, "retcode": retcode, "pid": 1}


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "pki" / "etcd" / "ca.key"
    path.parent.mkdir(parents=True)
    path.write_bytes(os.urandom(256))
    return path


# -- sealing ------------------------------------------------------------------------------


def test_a_sealed_backup_opens_with_the_same_key_only(tmp_path, key_file):
    plain = tmp_path / "snapshot.db"
    plain.write_bytes(os.urandom(3 * (1 << 20) + 17))  # more than one chunk
    sealed = tmp_path / "out" / "b.kosbak"
    kos_backup.seal(str(plain), str(sealed), str(key_file))
    assert oct(sealed.stat().st_mode & 0o777) == "0o600"
    assert plain.read_bytes()[:4096] not in sealed.read_bytes()

    opened = tmp_path / "opened.db"
    kos_backup.open_sealed(str(sealed), str(opened), str(key_file))
    assert opened.read_bytes() == plain.read_bytes()

    other = tmp_path / "other.key"
    other.write_bytes(os.urandom(256))
    kept = tmp_path / "kept.db"
    kept.write_text("as it was")
    with pytest.raises(CommandExecutionError, match="another cluster"):
        kos_backup.open_sealed(str(sealed), str(kept), str(other))
    assert kept.read_text() == "as it was"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["pki", "snapshot.db", "out", "opened.db", "other.key", "kept.db"])  # no temporary left


def test_a_changed_or_foreign_file_is_refused(tmp_path, key_file):
    plain = tmp_path / "snapshot.db"
    plain.write_bytes(b"etcd data" * 1000)
    sealed = tmp_path / "b.kosbak"
    kos_backup.seal(str(plain), str(sealed), str(key_file))
    data = bytearray(sealed.read_bytes())
    data[100] ^= 1
    sealed.write_bytes(bytes(data))
    with pytest.raises(CommandExecutionError, match="was changed"):
        kos_backup.open_sealed(str(sealed), str(tmp_path / "x.db"), str(key_file))
    assert not (tmp_path / "x.db").exists()
    with pytest.raises(CommandExecutionError, match="not a backup sealed by kos"):
        kos_backup.open_sealed(str(plain), str(tmp_path / "x.db"), str(key_file))


def test_sealing_without_the_key_names_it(tmp_path):
    plain = tmp_path / "snapshot.db"
    plain.write_bytes(b"x")
    with pytest.raises(CommandExecutionError, match="only a control plane can"):
        kos_backup.seal(str(plain), str(tmp_path / "b"), str(tmp_path / "nokey"))


# -- kubeadm: snapshot and restore ----------------------------------------------------------


def etcd_manifest(kube_dir, where="manifests"):
    pki = kube_dir / "pki" / "etcd"
    pki.mkdir(parents=True, exist_ok=True)
    doc = {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{
        "name": "etcd", "image": IMAGE, "command": [
            "etcd", "--advertise-client-urls=https://10.0.0.21:2379",
            f"--cert-file={pki}/server.crt", f"--key-file={pki}/server.key",
            f"--data-dir={kube_dir.parent / 'var' / 'etcd'}",
            "--initial-advertise-peer-urls=https://10.0.0.21:2380",
            "--name=k8s-cp-2", f"--trusted-ca-file={pki}/ca.crt"]}]}}
    (kube_dir / where).mkdir(parents=True, exist_ok=True)
    (kube_dir / where / "etcd.yaml").write_text(yaml.safe_dump(doc))
    api = {"spec": {"containers": [{"name": "kube-apiserver", "image": "x", "command": [
        "kube-apiserver", "--secure-port=6443"]}]}}
    (kube_dir / where / "kube-apiserver.yaml").write_text(yaml.safe_dump(api))
    (kube_dir / where / "kube-scheduler.yaml").write_text("{}")
    return pki


class FakeEtcd:
    """ctr images mount/unmount and the image's etcdctl / etcdutl, as argument lists."""

    def __init__(self, fail=None):
        self.calls = []
        self.mounted = None
        self.fail = fail
        self.members = []

    def __call__(self, cmd, **kw):
        self.calls.append(list(cmd))
        if cmd[0] == "ctr":
            if cmd[4] == "mount":
                self.mounted = cmd[6]
            else:
                assert cmd[4:6] == ["unmount", "--rm"] and cmd[6] == self.mounted
                self.mounted = None
            return result()
        tool = os.path.basename(cmd[0])
        assert self.mounted and cmd[0] == os.path.join(self.mounted, "usr/local/bin", tool)
        if self.fail == tool:
            return result(retcode=5, stderr="Error: context deadline exceeded")
        if cmd[-3:] == ["member", "list", "--write-out=json"]:
            return result(json.dumps({"header": {"cluster_id": 1}, "members": self.members}))
        if cmd[-3:-1] == ["member", "remove"]:
            self.members = [m for m in self.members if format(m["ID"], "x") != cmd[-1]]
            return result(f"Member {cmd[-1]} removed from cluster 1")
        if cmd[1:3] == ["snapshot", "status"]:
            return result(json.dumps({"hash": 1234, "revision": 987, "totalKey": 321,
                                      "totalSize": 2097152}))
        if "save" in cmd:
            Path(cmd[-1]).write_bytes(b"snapshot of revision 987")
        if "restore" in cmd:
            data = Path(cmd[cmd.index("--data-dir") + 1])
            (data / "member" / "snap").mkdir(parents=True)
            (data / "member" / "snap" / "db").write_bytes(Path(cmd[3]).read_bytes())
        return result()


@pytest.fixture
def etcd():
    return FakeEtcd()


@pytest.fixture
def kube_dir(tmp_path):
    return tmp_path / "etc" / "kubernetes"


@pytest.fixture
def got(tmp_path):
    """What the master's file server serves (cp.get_file)."""
    return {}


@pytest.fixture
def configure_loader_modules(etcd, kube_dir, got):
    run_all = create_autospec(salt.modules.cmdmod.run_all, side_effect=etcd)

    def get_file(source, dest, saltenv="base"):
        if source not in got:
            return ""
        shutil.copyfile(got[source], dest)
        return dest

    return {kos_etcd: {"__context__": {},
                      "__salt__": {"cmd.run_all": run_all, "cp.get_file": get_file,
                                   "config.get": lambda key, default="": (
                                       str(kube_dir) if key == "kubeadm:kube_dir" else default)}}}


def test_a_snapshot_is_saved_with_the_members_own_certificate_from_its_own_image(
        tmp_path, kube_dir, etcd):
    pki = etcd_manifest(kube_dir)
    taken = kos_etcd.etcd_snapshot(str(tmp_path / "backups"))
    mount, save, status, unmount = etcd.calls
    root = mount[6]
    assert mount == ["ctr", "-n", "k8s.io", "images", "mount", IMAGE, root]
    assert save == [f"{root}/usr/local/bin/etcdctl", "--endpoints=https://127.0.0.1:2379",
                    f"--cacert={pki}/ca.crt", f"--cert={pki}/server.crt",
                    f"--key={pki}/server.key", "snapshot", "save", taken["path"]]
    assert status[1:4] == ["snapshot", "status", taken["path"]]
    assert unmount == ["ctr", "-n", "k8s.io", "images", "unmount", "--rm", root]
    assert not os.path.exists(root)
    assert taken["name"].startswith("etcd-k8s-cp-2-") and taken["name"].endswith("Z")
    assert (taken["revision"], taken["keys"], taken["hash"]) == (987, 321, 1234)
    assert taken["key_file"] == f"{pki}/ca.key"
    assert oct(os.stat(tmp_path / "backups").st_mode & 0o777) == "0o700"


def test_a_failed_save_says_why_and_unmounts_the_image(tmp_path, kube_dir, etcd):
    etcd_manifest(kube_dir)
    etcd.fail = "etcdctl"
    with pytest.raises(CommandExecutionError, match="context deadline exceeded"):
        kos_etcd.etcd_snapshot(str(tmp_path / "backups"))
    assert etcd.calls[-1][4:6] == ["unmount", "--rm"] and etcd.mounted is None


def test_a_node_without_etcd_is_refused_by_name(tmp_path, kube_dir):
    with pytest.raises(CommandExecutionError, match="run on control planes with stacked etcd"):
        kos_etcd.etcd_snapshot(str(tmp_path / "backups"))


# -- etcd members of a control plane that is gone ---------------------------------------------


def member(mid, name, ip):
    # etcdctl's JSON: IDs as (uint64) numbers, no name while the member never started
    return {"ID": mid, **({"name": name} if name else {}), "peerURLs": [f"https://{ip}:2380"],
            "clientURLs": [f"https://{ip}:2379"] if name else []}


def test_a_gone_control_planes_member_and_its_unstarted_one_are_removed_by_name_and_url(
        kube_dir, etcd):
    pki = etcd_manifest(kube_dir)
    etcd.members = [member(0x8e9e05c52164694d, "k8s-cp-1", "10.0.0.20"),
                    member(0x91bc3c398fb3c146, "k8s-cp-2", "10.0.0.21"),
                    member(0xfd422379fda50e48, "k8s-cp-3", "10.0.0.22"),
                    member(0x2a4c6e1d9b7f3e05, None, "10.0.0.22")]
    assert [m["id"] for m in kos_etcd.etcd_member_list()] == [
        "8e9e05c52164694d", "91bc3c398fb3c146", "fd422379fda50e48", "2a4c6e1d9b7f3e05"]
    removed = kos_etcd.etcd_member_remove("k8s-cp-3", peer_url="https://10.0.0.22:2380")
    assert [m["id"] for m in removed] == ["fd422379fda50e48", "2a4c6e1d9b7f3e05"]
    assert [m["name"] for m in kos_etcd.etcd_member_list()] == ["k8s-cp-1", "k8s-cp-2"]
    root = etcd.calls[-1][6]
    remove = [c for c in etcd.calls if "remove" in c][0]
    assert remove[1:] == ["--endpoints=https://127.0.0.1:2379", f"--cacert={pki}/ca.crt",
                          f"--cert={pki}/server.crt", f"--key={pki}/server.key",
                          "member", "remove", "fd422379fda50e48"]
    assert etcd.mounted is None and not os.path.exists(root)
    # gone already: nothing to remove, nothing asked of etcd but the list
    before = len(etcd.calls)
    assert kos_etcd.etcd_member_remove("k8s-cp-3", peer_url="https://10.0.0.22:2380") == []
    assert [c for c in etcd.calls[before:] if "remove" in c] == []


def test_a_control_plane_never_removes_its_own_member(kube_dir, etcd):
    etcd_manifest(kube_dir)  # this node's member is k8s-cp-2
    etcd.members = [member(1, "k8s-cp-2", "10.0.0.21")]
    with pytest.raises(CommandExecutionError, match="this node's own etcd member"):
        kos_etcd.etcd_member_remove("k8s-cp-2")
    assert etcd.calls == [] and len(etcd.members) == 1


def test_restore_stage_opens_the_masters_copy_beside_the_data_dir_and_leaves_etcd_alone(
        tmp_path, kube_dir, etcd, got):
    pki = etcd_manifest(kube_dir)
    (pki / "ca.key").write_bytes(os.urandom(64))
    plain = tmp_path / "snap.db"
    plain.write_bytes(b"the snapshot")
    kos_backup.seal(str(plain), str(tmp_path / "b.kosbak"), str(pki / "ca.key"))
    got["salt://b.kosbak"] = tmp_path / "b.kosbak"
    data = kube_dir.parent / "var" / "etcd"
    (data / "member").mkdir(parents=True)
    (data / "member" / "live").write_text("running member")
    (data.parent / "etcd.kos-restore").mkdir()  # an earlier try's
    (data.parent / "etcd.kos-restore" / "stale").write_text("x")

    members = "k8s-cp-1=https://10.0.0.20:2380,k8s-cp-2=https://10.0.0.21:2380"
    staging = kos_etcd.etcd_restore_stage("salt://b.kosbak", members, "kos-restore-b")
    restore = next(c for c in etcd.calls if "restore" in c)
    assert restore[1:3] == ["snapshot", "restore"]
    assert restore[4:] == ["--data-dir", staging, "--name", "k8s-cp-2", "--initial-cluster",
                           members, "--initial-cluster-token", "kos-restore-b",
                           "--initial-advertise-peer-urls", "https://10.0.0.21:2380",
                           "--bump-revision", "1000000000", "--mark-compacted"]
    assert staging == f"{data}.kos-restore"
    assert (Path(staging) / "member" / "snap" / "db").read_bytes() == b"the snapshot"
    assert not (Path(staging) / "stale").exists()
    assert (data / "member" / "live").read_text() == "running member"
    assert sorted(p.name for p in data.parent.iterdir()) == ["etcd", "etcd.kos-restore"]


def test_restore_stage_of_a_backup_the_master_lacks(kube_dir, got):
    etcd_manifest(kube_dir)
    with pytest.raises(CommandExecutionError, match="serves no backup salt://gone.kosbak"):
        kos_etcd.etcd_restore_stage("salt://gone.kosbak", "a=https://1.2.3.4:2380", "t")


def test_stop_swap_start_put_the_staged_data_in_place_once(kube_dir, monkeypatch):
    etcd_manifest(kube_dir)
    data = kube_dir.parent / "var" / "etcd"
    (data / "member").mkdir(parents=True)
    (data / "member" / "old").write_text("old")
    staging = Path(f"{data}.kos-restore")
    (staging / "member").mkdir(parents=True)
    (staging / "member" / "new").write_text("new")
    listening = {2379: True, 6443: True}
    monkeypatch.setattr(kos_etcd, "_listening", lambda port: listening[port])
    monkeypatch.setattr(kos_etcd.time, "sleep", lambda s: listening.update({2379: False, 6443: False}))

    with pytest.raises(CommandExecutionError, match="stop it first"):
        kos_etcd.etcd_restore_swap()
    assert kos_etcd.control_plane_stopped(timeout=5) == ["kube-apiserver.yaml", "etcd.yaml"]
    assert sorted(os.listdir(kube_dir / "manifests")) == ["kube-scheduler.yaml"]
    assert kos_etcd.control_plane_stopped(timeout=5) == []

    kept = kos_etcd.etcd_restore_swap()
    assert (data / "member" / "new").read_text() == "new"
    assert (Path(kept) / "member" / "old").read_text() == "old"
    assert kos_etcd.etcd_restore_swap() is None  # done already

    # The API server comes back only once etcd is healthy (a quorum of restored members).
    healthy = iter([False, False, True])
    seen = []

    def etcd_healthy(_kube_dir=None):
        seen.append(sorted(os.listdir(kube_dir / "manifests")))
        return next(healthy)

    monkeypatch.setattr(kos_etcd, "_etcd_healthy", etcd_healthy)
    monkeypatch.setattr(kos_etcd.time, "sleep", lambda s: listening.update({6443: True}))
    assert kos_etcd.control_plane_started(timeout=5) == ["etcd.yaml", "kube-apiserver.yaml"]
    assert seen == [["etcd.yaml", "kube-scheduler.yaml"]] * 3
    assert sorted(os.listdir(kube_dir / "manifests")) == [
        "etcd.yaml", "kube-apiserver.yaml", "kube-scheduler.yaml"]
    assert not (kube_dir / kos_etcd.STOPPED_DIR).exists()


def test_an_etcd_without_quorum_keeps_the_api_server_stopped_and_is_named(kube_dir, monkeypatch):
    etcd_manifest(kube_dir)
    aside = kube_dir / kos_etcd.STOPPED_DIR
    aside.mkdir()
    for name in kos_etcd.RESTORE_STOPS:
        (kube_dir / "manifests" / name).rename(aside / name)
    monkeypatch.setattr(kos_etcd, "_etcd_healthy", lambda kube_dir=None: False)
    monkeypatch.setattr(kos_etcd.time, "sleep", lambda s: None)
    with pytest.raises(CommandExecutionError, match="etcd is not healthy 0 s after"):
        kos_etcd.control_plane_started(timeout=0)
    assert os.listdir(aside) == ["kube-apiserver.yaml"]
    # a re-run, once the other members run, finishes the start
    monkeypatch.setattr(kos_etcd, "_etcd_healthy", lambda kube_dir=None: True)
    monkeypatch.setattr(kos_etcd, "_listening", lambda port: True)
    assert kos_etcd.control_plane_started(timeout=0) == ["kube-apiserver.yaml"]
    assert not aside.exists()


def test_an_api_server_that_does_not_stop_is_named(kube_dir, monkeypatch):
    etcd_manifest(kube_dir)
    monkeypatch.setattr(kos_etcd, "_listening", lambda port: port == 6443)
    monkeypatch.setattr(kos_etcd.time, "sleep", lambda s: None)
    with pytest.raises(CommandExecutionError, match="still answers 0 s after"):
        kos_etcd.control_plane_stopped(timeout=0)


# -- kos.backup on the control plane, kos.backups_kept on the master -------------------------


def backup_module(tmp_path, key_file, distribution="kubeadm", pushed=True):
    sent = []

    def snapshot(directory):
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, "etcd-k8s-cp-1-20261127T180000Z.db")
        Path(path).write_bytes(b"snapshot")
        return {"path": path, "name": "etcd-k8s-cp-1-20261127T180000Z", "revision": 9,
                "keys": 3, "hash": 77, "key_file": str(key_file)}

    def push(path):
        sent.append(Path(path).read_bytes())
        return pushed

    kos_mod.__salt__ = {"kos_etcd.etcd_snapshot": snapshot, "cp.push": push,
                        "microk8s_backup.backup": lambda directory: dict(
                            snapshot(directory), name="microk8s-k8s-cp-1-20261127T180000Z")}
    kos_mod.__pillar__ = {"kos": {"distribution": distribution}}
    return sent


def test_kos_backup_pushes_the_sealed_snapshot_and_keeps_nothing_here(tmp_path, key_file):
    sent = backup_module(tmp_path, key_file)
    done = kos_mod.backup(str(tmp_path / "b"))
    assert done["name"] == "etcd-k8s-cp-1-20261127T180000Z.kosbak"
    assert (done["revision"], done["keys"], done["hash"]) == (9, 3, 77)
    assert len(sent) == 1 and sent[0].startswith(b"KOSBAK1\n") and b"snapshot" not in sent[0]
    assert done["size"] == len(sent[0])
    assert os.listdir(tmp_path / "b") == []


def test_kos_backup_refused_by_the_master_leaves_nothing_here(tmp_path, key_file):
    backup_module(tmp_path, key_file, pushed=False)
    with pytest.raises(CommandExecutionError, match="file_recv_max_size"):
        kos_mod.backup(str(tmp_path / "b"))
    assert os.listdir(tmp_path / "b") == []


@pytest.mark.parametrize("pillar", [{}, {"kubernetes": {"distribution": "kubeadm"}}])
def test_kos_backup_without_kos_distribution_takes_none_and_says_where_it_comes_from(
        tmp_path, key_file, pillar):
    # a guessed distribution would back up the wrong datastore (or fail obscurely)
    sent = backup_module(tmp_path, key_file)
    kos_mod.__pillar__ = pillar
    with pytest.raises(CommandExecutionError, match=r"pillar key 'kos:distribution' is not in "
                       r"the pillar; set kubernetes_distribution \(microk8s or kubeadm\) in "
                       r"the Terraform variables"):
        kos_mod.backup(str(tmp_path / "b"))
    assert sent == [] and not (tmp_path / "b").exists()


def test_kos_backup_of_microk8s_takes_a_dbctl_backup(tmp_path, key_file):
    sent = backup_module(tmp_path, key_file, distribution="microk8s")
    done = kos_mod.backup(str(tmp_path / "b"))
    assert done["name"] == "microk8s-k8s-cp-1-20261127T180000Z.kosbak"
    assert len(sent) == 1 and os.listdir(tmp_path / "b") == []


@pytest.mark.parametrize("test", [True, False], ids=["test", "apply"])
def test_the_master_files_pushed_backups_and_keeps_the_newest(tmp_path, test):
    incoming = tmp_path / "minions"
    pushed = incoming / "k8s-cp-1.x" / "files" / "var" / "lib" / "kos" / "backups"
    pushed.mkdir(parents=True)
    (pushed / "etcd-k8s-cp-1-20261127T180000Z.kosbak").write_bytes(b"newest")
    kept = tmp_path / "backups"
    kept.mkdir()
    for t in ("20261125T180000Z", "20261126T180000Z", "20261124T180000Z"):
        (kept / f"etcd-k8s-cp-1-{t}.kosbak").write_bytes(t.encode())
    kos_state.__opts__ = {"test": test}
    ret = kos_state.backups_kept(str(kept), str(incoming), keep=2)
    assert ret["changes"] == {"filed": ["etcd-k8s-cp-1-20261127T180000Z.kosbak"],
                              "removed": ["etcd-k8s-cp-1-20261124T180000Z.kosbak",
                                          "etcd-k8s-cp-1-20261125T180000Z.kosbak"]}
    names = sorted(os.listdir(kept))
    if test:
        assert ret["result"] is None and len(names) == 3
        return
    assert ret["result"] is True
    assert names == ["etcd-k8s-cp-1-20261126T180000Z.kosbak",
                     "etcd-k8s-cp-1-20261127T180000Z.kosbak"]
    assert oct((kept / names[-1]).stat().st_mode & 0o777) == "0o600"
    assert list(pushed.iterdir()) == []
    again = kos_state.backups_kept(str(kept), str(incoming), keep=2)
    assert again["changes"] == {} and again["result"] is True


def test_the_master_lists_its_backups_oldest_first(tmp_path):
    for t in ("20261126T180000Z", "20261125T180000Z"):
        (tmp_path / f"etcd-k8s-cp-1-{t}.kosbak").write_bytes(b"12345")
    (tmp_path / "notes.txt").write_text("x")
    assert kos_mod.backups(str(tmp_path)) == [
        {"name": "etcd-k8s-cp-1-20261125T180000Z.kosbak", "size": 5, "time": "2026-11-25T18:00:00Z"},
        {"name": "etcd-k8s-cp-1-20261126T180000Z.kosbak", "size": 5, "time": "2026-11-26T18:00:00Z"},
    ]


def test_a_microk8s_restore_opens_the_masters_copy_under_its_own_name_and_keeps_nothing(
        tmp_path, monkeypatch):
    snap_data = tmp_path / "snap"
    (snap_data / "certs").mkdir(parents=True)
    (snap_data / "certs" / "ca.key").write_bytes(os.urandom(64))
    archive = tmp_path / "microk8s-k8s-cp-1-20261127T180000Z.tar.gz"
    archive.write_bytes(b"objects")
    sealed = tmp_path / "microk8s-k8s-cp-1-20261127T180000Z.kosbak"
    kos_backup.seal(str(archive), str(sealed), str(snap_data / "certs" / "ca.key"))
    restored = []

    def get_file(source, dest, saltenv="base"):
        assert (source, saltenv) == (f"salt://{sealed.name}", "kos-backups")
        shutil.copyfile(sealed, dest)
        return dest

    def restore_from(path):
        restored.append((os.path.basename(path), Path(path).read_bytes()))
        return True

    work = tmp_path / "work"
    monkeypatch.setattr(kos_mod, "BACKUP_DIR", str(work))
    kos_mod.__salt__ = {"cp.get_file": get_file, "microk8s_backup.restore_from": restore_from,
                        "pillar.get": lambda key, default=None, unmask=None:
                            # as Salt 3008's: masked unless asked
                            str(snap_data) if unmask else "**********"}
    assert kos_mod.restore_dqlite(f"salt://{sealed.name}") is True
    assert restored == [(archive.name, b"objects")]
    assert os.listdir(work) == []

    kos_mod.__salt__["cp.get_file"] = lambda source, dest, saltenv="base": ""
    with pytest.raises(CommandExecutionError, match="serves no backup"):
        kos_mod.restore_dqlite("salt://gone.kosbak")
    assert os.listdir(work) == []
