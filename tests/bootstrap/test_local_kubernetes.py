"""
The rehearsal cloud's Kubernetes from source (kos_local.kubernetes) and how the cloud
points the kubeadm formula at it (kos_local.pillar_layer), without building anything: the
module build of the source zip, the image archives the formula imports, the packages'
layout, the mirror's pillar. The build itself runs for real in the end-to-end tests.
"""

import fcntl
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import time
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import kos_local
from kos_local import cloud_provider, csi, debrepo, hosts, kubernetes, net
from kos_local.image import BuildFailed
from tests.unit.conftest import load

IMAGES_MODULE = load("modules", "kos_images")
GO_MOD = """\
module k8s.io/kubernetes

go 1.22.0

require (
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
\tk8s.io/sample-apiserver v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/sample-apiserver => ./staging/src/k8s.io/sample-apiserver
\tk8s.io/sample-controller => ./staging/src/k8s.io/sample-controller
\tgithub.com/example/x => github.com/example/x v1.2.3
)
"""


def test_the_source_builds_against_the_published_staging_modules(tmp_path):
    (tmp_path / "go.mod").write_text(GO_MOD)
    for name in ("go.work", "go.work.sum"):
        (tmp_path / name).write_text("")
    (tmp_path / "vendor").mkdir()
    kubernetes._as_module_build(tmp_path, "v1.31.4")
    text = (tmp_path / "go.mod").read_text()
    assert "\tk8s.io/api => k8s.io/api v0.31.4\n" in text
    assert "\tk8s.io/client-go => k8s.io/client-go v0.31.4\n" in text
    assert "./staging" not in text and "github.com/example/x v1.2.3" in text
    # the examples no command imports, which the proxy does not always serve, are gone
    assert "sample-" not in text
    assert not any((tmp_path / n).exists() for n in ("go.work", "go.work.sum", "vendor"))


def test_versions_and_where_the_build_goes(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    # the formula's pin is the one source of the version built
    defaults = yaml.safe_load(kubernetes.DEFAULTS.read_text())
    assert kubernetes.pinned_version() == defaults["version"]
    assert kubernetes.package_version(defaults["version"]) == defaults["package_version"]
    assert kubernetes.root("v1.31.4") == tmp_path / "kos" / "kubernetes" / (
        f"v1.31.4-r{kubernetes.RECIPE}")
    assert kubernetes.keyring_name() == "kubernetes-apt-keyring.gpg"
    with pytest.raises(kubernetes.PreflightError, match="not a release"):
        kubernetes.ensure("1.31")


def test_ldflags_stamp_the_version_kubeadm_and_the_kubelet_report():
    flags = kubernetes._ldflags("v1.31.4", "a78aa47", "2024-12-10T11:37:26Z")
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        assert f"-X {pkg}.gitVersion=v1.31.4" in flags
        assert f"-X {pkg}.gitMinor=31" in flags and f"-X {pkg}.gitTreeState=clean" in flags


def test_an_image_archive_is_what_containerd_and_the_formula_read(tmp_path):
    (tmp_path / "pause").write_bytes(b"\x7fELF pause")
    target = tmp_path / "pause.tar"
    kubernetes.write_image(target, "registry.k8s.io/pause:3.10",
                           kubernetes.IMAGES["pause"], tmp_path)
    # the formula's own reader names the image kubeadm pulls
    assert IMAGES_MODULE.archive_images(str(target)) == ["registry.k8s.io/pause:3.10"]
    with tarfile.open(target) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))[0]
        config = json.load(tar.extractfile(manifest["Config"]))
        layer = tarfile.open(fileobj=tar.extractfile(manifest["Layers"][0]))
        assert layer.extractfile("usr/local/bin/pause").read() == b"\x7fELF pause"
    assert config["config"]["Entrypoint"] == ["/usr/local/bin/pause"]
    assert config["os"] == "linux" and config["architecture"] == "amd64"
    assert len(config["rootfs"]["diff_ids"]) == 1


def test_packages_put_files_where_pkgs_k8s_io_does(tmp_path):
    for name in ("kubelet", "kubeadm", "kubectl"):
        (tmp_path / name).write_bytes(b"binary")
    assert sorted(debrepo._deb_files("kubelet", tmp_path)) == [
        "/usr/bin/kubelet", "/usr/lib/systemd/system/kubelet.service"]
    assert sorted(debrepo._deb_files("kubeadm", tmp_path)) == [
        "/usr/bin/kubeadm", "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"]
    assert "kubelet" in debrepo.DEB_DEPENDS["kubeadm"]


def test_a_failed_step_is_named_with_its_log(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("")
    build = kubernetes.Build(kubernetes._Title("v1.31.4"), tmp_path, log)
    with pytest.raises(BuildFailed) as err:
        with build.stage("kubeadm with go1.22.9"):
            build.run("false")
    assert "failed at step 'kubeadm with go1.22.9'" in err.value.problem
    assert str(log) in err.value.fix and "module proxy" in err.value.fix


def _with_cloud_controller(build_dir):
    """The cloud controller's and the Cinder CSI's stages done in ``build_dir``."""
    (build_dir / "images").mkdir(exist_ok=True)
    (build_dir / "images" / cloud_provider.ARCHIVE).touch()
    version = build_dir.name.split("-r")[0]
    for key, ref in csi.images(kubernetes.formula_defaults()["csi"]["images"], version).items():
        csi._marker(build_dir, key, ref).touch()


def test_the_csi_images_are_the_formulas_but_the_registrar_and_grow_xfs():
    """The rehearsal's pillar names the formula's sidecars as they are, its plugin at the
    cloud controller's release, and kos's own registrar (no upstream release is served);
    its classes are the formula's with XFS, which grows mounted here, made in Cinder's only
    zone whatever the node's."""
    defaults = kubernetes.formula_defaults()["csi"]
    layer = kos_local.pillar_layer("v1.31.4")["kubeadm"]["csi"]
    assert {k: layer["images"][k] for k in csi.SIDECARS} == {
        k: defaults["images"][k] for k in csi.SIDECARS}
    assert layer["images"]["plugin"] == "registry.k8s.io/provider-os/cinder-csi-plugin:" + (
        cloud_provider.release("v1.31.4"))
    assert layer["images"]["registrar"].startswith(f"kos.local/{csi.REGISTRAR}:")
    assert [c["name"] for c in layer["storage_classes"]] == [
        c["name"] for c in defaults["storage_classes"]]
    assert {(c["fstype"], c["availability"]) for c in layer["storage_classes"]} == {
        ("xfs", "nova")}
    assert layer["ignore_volume_az"] is True


def test_each_minor_has_pkgs_k8s_io_path_in_the_mirror(monkeypatch, tmp_path):
    """``core:/stable:/v1.31`` leads to the last build of 1.31, so the formula's URL and
    orch.upgrade's rewrite of it to another minor work as against pkgs.k8s.io."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for version in ("v1.31.4", "v1.32.3"):
        built = kubernetes.root(version)
        (built / "deb").mkdir(parents=True)
        (built / kubernetes.MARKER).touch()
        _with_cloud_controller(built)
        assert kubernetes.ensure(version) == built  # built already: linked only
    mirror = kubernetes.root("v1.31.4").parent
    assert kubernetes.minor_dir("v1.32.3") == Path("core:/stable:/v1.32")
    assert (mirror / "core:/stable:/v1.31/deb").resolve() == kubernetes.root("v1.31.4") / "deb"
    assert (mirror / "core:/stable:/v1.32").resolve() == kubernetes.root("v1.32.3")
    # relative, so it resolves where the hosts see the mirror too
    assert not str((mirror / "core:/stable:/v1.32").readlink()).startswith("/")
    later = kubernetes.root("v1.32.4")
    later.mkdir()
    (later / kubernetes.MARKER).touch()
    _with_cloud_controller(later)
    kubernetes.ensure("v1.32.4")
    assert (mirror / "core:/stable:/v1.32").resolve() == later


def planned(distribution):
    """Outputs whose Terraform pillar plans ``distribution``."""
    return {"salt_pillar": yaml.safe_dump({"kos": {"distribution": distribution}})}


def test_kos_up_builds_kubernetes_beside_the_cloud_and_waits_for_it_before_the_nodes_need_it(
        monkeypatch, tmp_path):
    """The build starts in a process of its own when the cloud is set up; the cloud's pillar,
    which points the nodes at the mirror, waits for it (its lock) and reports what the build
    reports: here, a machine without Go gets the one error that says to install it, and no
    half-made build."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "no-go"))
    version = kubernetes.pinned_version()
    backend = kos_local.LocalBackend.__new__(kos_local.LocalBackend)
    build = kubernetes.start()
    assert build
    with pytest.raises(kubernetes.PreflightError, match="Go is needed") as err:
        backend.pillar_layers(planned("kubeadm"))
    assert "apt-get install golang" in err.value.fix
    assert build.wait() != 0
    log = kubernetes.log_path(version, "start.log")
    assert "Go is needed" in log.read_text() and "Warning" not in log.read_text()
    assert not kubernetes.built(version)
    assert sorted(p.name for p in kubernetes.root(version).parent.iterdir()) == [
        f".{version}.lock", log.name]
    # microk8s on this cloud is the stand-ins: nothing to wait for
    assert "_cloud.sls" in backend.pillar_layers(planned("microk8s"))
    # Kubernetes built but not its cloud controller (a build made before it existed): only
    # that stage is missing, and it needs Go as well; the build stays
    kubernetes.root(version).mkdir(parents=True)
    (kubernetes.root(version) / kubernetes.MARKER).touch()
    assert not kubernetes.built(version)
    with pytest.raises(kubernetes.PreflightError, match="Go is needed"):
        kubernetes.ensure(version)
    assert (kubernetes.root(version) / kubernetes.MARKER).exists()
    # built: nothing starts, and the hook only links the minor
    _with_cloud_controller(kubernetes.root(version))
    assert kubernetes.start() is None
    layers = backend.pillar_layers(planned("kubeadm"))
    assert yaml.safe_load(layers["_cloud.sls"]) == kos_local.pillar_layer()
    assert (kubernetes.root(version).parent / kubernetes.minor_dir(version)).resolve() == (
        kubernetes.root(version))


def test_a_build_under_way_is_not_started_twice_and_its_log_is_kept(monkeypatch, tmp_path):
    """The test suite's prebuild starts the build and kos up starts it again: the second
    start leaves the running build alone (kos up waits on its lock) and its log whole; a
    later start adds to the log, it never truncates what a build may still write."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "no-go"))
    version = kubernetes.pinned_version()
    kubernetes.root(version).parent.mkdir(parents=True)
    log = kubernetes.log_path(version, "start.log")
    log.write_text("what the running build printed\n")
    with open(kubernetes._lock_path(version), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert kubernetes.start(version) is None
        assert log.read_text() == "what the running build printed\n"
    build = kubernetes.start(version)
    assert build.wait() != 0
    text = log.read_text()
    assert text.startswith("what the running build printed\nkos: building Kubernetes ")
    assert "Go is needed" in text and "\0" not in text


def _relink(root, rounds):
    versions = [root / "v1.32.3-r3", root / "v1.32.4-r3"]
    for i in range(rounds):
        kubernetes._link_minor(versions[i % 2], ("v1.32.3", "v1.32.4")[i % 2])


def test_processes_that_link_the_minor_at_once_all_succeed(tmp_path):
    """kos up, its background build and the prebuild link the minor the moment the build
    they waited for ends (the prebuild once died there on another's temporary link)."""
    for name in ("v1.32.3-r3", "v1.32.4-r3"):
        (tmp_path / name).mkdir()
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_relink, args=(tmp_path, 300)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]
    link = tmp_path / "core:" / "stable:" / "v1.32"
    assert link.resolve() in {tmp_path / "v1.32.3-r3", tmp_path / "v1.32.4-r3"}
    assert [p.name for p in link.parent.iterdir()] == ["v1.32"]


def test_the_cloud_controller_is_the_release_of_the_clusters_minor_at_the_formulas_path(
        tmp_path):
    image = kubernetes.formula_defaults()["ccm"]["image"]
    assert cloud_provider.release("v1.31.4") == "v1.31.2"
    # a minor without a served release keeps the last one; none before the first
    assert cloud_provider.release("v1.32.9") == "v1.31.2"
    assert cloud_provider.release("v1.30.8") is None
    ref = cloud_provider.image_ref(image, "v1.31.2")
    assert ref.rsplit(":", 1) == [image.rsplit(":", 1)[0], "v1.31.2"]
    (tmp_path / cloud_provider.COMMAND).write_bytes(b"\x7fELF occm")
    target = tmp_path / cloud_provider.ARCHIVE
    kubernetes.write_image(target, ref, {"bin": [cloud_provider.COMMAND],
                                         "bin_dir": cloud_provider.IMAGE_BIN_DIR}, tmp_path)
    assert IMAGES_MODULE.archive_images(str(target)) == [ref]
    # where the formula's static Pod runs it from
    pod = (kubernetes.REPO / "salt" / "salt" / "kubeadm" / "files" /
           "openstack-cloud-controller-manager.yaml.jinja").read_text()
    command = pod.split("command:", 1)[1].split("- ", 1)[1].split()[0]
    with tarfile.open(target) as tar:
        manifest = json.load(tar.extractfile("manifest.json"))[0]
        layer = tarfile.open(fileobj=tar.extractfile(manifest["Layers"][0]))
        assert layer.extractfile(command.lstrip("/")).read() == b"\x7fELF occm"
    # the rehearsal's pillar runs it, at that tag
    assert kos_local.pillar_layer("v1.31.4")["kubeadm"]["ccm"] == {"enabled": True,
                                                                  "image": ref}


def test_the_pillar_layer_points_the_formula_at_the_mirror(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    layer = kos_local.pillar_layer("v1.31.4")["kubeadm"]
    here = f"{kos_local.MIRROR}/core:/stable:/v1.31"
    assert layer["repo"] == {"url": f"file:{here}/deb/",
                             "key_url": f"file://{here}/deb/kubernetes-apt-keyring.gpg"}
    assert layer["images"] == {"archive_dir": f"{here}/images"}
    assert layer["network"]["mode"] == "routed"
    # the formula validates what it is given: the layer is a valid kubeadm pillar
    schema = load("utils", "kos_schema")
    assert [m for m in schema.check({"kubeadm": layer}) if "kubeadm" in m] == []
    assert [m for m in schema.check({"kubeadm": {"repo": {"url": "ftp://x/"}}})
            if "kubeadm" in m]


def test_a_kubelet_host_gets_cgroups_below_this_process(monkeypatch, tmp_path):
    monkeypatch.setattr(hosts, "own_cgroups",
                        lambda: [(str(tmp_path / "memory"), "/process_api/x"),
                                 (str(tmp_path / "cpu"), "/")])
    m = hosts.Machine("kos-test-host", tmp_path / "host")
    assert m.cgroups() == [tmp_path / "memory/process_api/x/kos-hosts/kos-test-host",
                           tmp_path / "cpu/kos-hosts/kos-test-host"]


def test_a_host_fills_a_cpuset_parent_another_boot_made_but_not_filled(monkeypatch, tmp_path):
    # the materialiser boots servers side by side: one made kos-hosts, the other finds it
    # before its CPUs and memory nodes are in, and a cpuset without them takes no task
    monkeypatch.setattr(hosts, "own_cgroups", lambda: [(str(tmp_path / "cpuset"), "/")])
    root, parent = tmp_path / "cpuset", tmp_path / "cpuset/kos-hosts"
    parent.mkdir(parents=True)
    for f, value in (("cpuset.cpus", "0-1\n"), ("cpuset.mems", "0\n")):
        (root / f).write_text(value)
        (parent / f).write_text("\n")
    [made] = hosts.Machine("kos-test-host", tmp_path / "host").cgroups(create=True)
    assert made.is_dir()
    assert [(parent / f).read_text() for f in ("cpuset.cpus", "cpuset.mems")] == ["0-1\n", "0\n"]


def test_a_stopped_hosts_cgroups_go_with_what_its_kubelet_made_in_them(monkeypatch, tmp_path):
    monkeypatch.setattr(hosts, "own_cgroups",
                        lambda: [(str(tmp_path / "memory"), "/"), (str(tmp_path / "cpu"), "/")])
    parent = tmp_path / "memory/kos-hosts"
    for name in ("kos-c-0123abcd", "kos-c-cloud", "kos-cx-0123abcd"):
        (parent / name / "kubepods.slice/burstable").mkdir(parents=True)
    (tmp_path / "cpu/kos-hosts/kos-c-0123abcd").mkdir(parents=True)
    # a cgroup whose processes are still exiting refuses removal: here, one holding a file
    (parent / "kos-c-cloud/kubepods.slice/cgroup.procs").write_text("4242\n")
    found = hosts.machine_cgroups(net.cloud_pattern("c"))
    assert found == [parent / "kos-c-0123abcd", parent / "kos-c-cloud",
                     tmp_path / "cpu/kos-hosts/kos-c-0123abcd"]
    assert hosts.remove_cgroups(found, timeout=0.3) == [parent / "kos-c-cloud"]
    assert sorted(p.name for p in parent.iterdir()) == ["kos-c-cloud", "kos-cx-0123abcd"]
    assert not (tmp_path / "cpu/kos-hosts/kos-c-0123abcd").exists()


@pytest.mark.skipif(not shutil.which("go"), reason="needs go (the build's own toolchain)")
def test_the_pause_program_answers_v_as_the_real_one_and_stops_on_sigterm(tmp_path):
    # kubeadm upgrade's preflight runs the pause image with -v as a Job that must complete
    (tmp_path / "main.go").write_text(kubernetes.PAUSE_GO % "3.10")
    (tmp_path / "go.mod").write_text("module kos.invalid/pause\n\ngo 1.22\n")
    env = {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0",
           "GOCACHE": str(kubernetes.go_root() / "build"), "GOFLAGS": "-mod=mod"}
    subprocess.run(["go", "build", "-o", "pause", "."], cwd=tmp_path, env=env, check=True,
                   timeout=300)
    r = subprocess.run([tmp_path / "pause", "-v"], capture_output=True, text=True, timeout=10)
    assert (r.returncode, r.stdout) == (0, "pause.c 3.10\n")
    proc = subprocess.Popen([tmp_path / "pause"], stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert "Shutting down, got signal: Terminated" in proc.stderr.read()


def test_the_clouds_outputs_say_that_microk8s_is_the_stand_ins(monkeypatch):
    """kos status and kos down learn from the outputs, not from the cloud's code, that a
    microk8s cluster here is simulated (kos.backends)."""
    backend = kos_local.LocalBackend.__new__(kos_local.LocalBackend)
    monkeypatch.setattr(backend, "_environment", lambda: None)
    backend.openstack = SimpleNamespace(outputs=lambda: {"cluster_name": "kosl"})
    backend.state = SimpleNamespace(cluster="kosl")
    backend.cloud = SimpleNamespace(attached=lambda cluster: cluster == "kosl")
    assert backend.outputs() == {"cluster_name": "kosl", "simulated": ["microk8s"]}
    # no project on the cloud yet: no infrastructure, and nothing said about it
    backend.cloud = SimpleNamespace(attached=lambda cluster: False)
    assert backend.outputs() == {}
