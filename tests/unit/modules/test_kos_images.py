"""Unit tests of the kos_images execution module: images without a registry."""

import json

import pytest
from salt.exceptions import CommandExecutionError

from tests.unit.modules import kubeadm_modules as loader
from tests.unit.modules.kubeadm_modules import MODULES, called_args, result

# the fixtures: every kubeadm-side module on one loader, as a minion loads them
kube_dir = loader.kube_dir
configure_loader_modules = loader.configure_loader_modules

kos_images = MODULES["kos_images"]


def _archive(path, members):
    import io
    import tarfile

    with tarfile.open(path, "w") as tar:
        for name, doc in members.items():
            data = json.dumps(doc).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)


def test_archive_images_reads_docker_and_oci_archives(tmp_path):
    docker = _archive(tmp_path / "a.tar", {"manifest.json": [
        {"Config": "c.json", "RepoTags": ["registry.k8s.io/pause:3.10"], "Layers": []}]})
    assert kos_images.archive_images(docker) == ["registry.k8s.io/pause:3.10"]
    oci = _archive(tmp_path / "b.tar", {"index.json": {"manifests": [
        {"annotations": {"io.containerd.image.name": "registry.k8s.io/etcd:3.5.15-0"}},
        {"annotations": {"org.opencontainers.image.ref.name": "example.com/x:1"}}]}})
    assert kos_images.archive_images(oci) == ["registry.k8s.io/etcd:3.5.15-0", "example.com/x:1"]
    (tmp_path / "c.tar").write_text("not a tar")
    with pytest.raises(CommandExecutionError, match="not an image archive"):
        kos_images.archive_images(str(tmp_path / "c.tar"))


def test_images_and_their_import(run_all, tmp_path):
    run_all.return_value = result("registry.k8s.io/pause:3.10\nsha256:" + "a" * 64 + "\n")
    assert kos_images.images() == ["registry.k8s.io/pause:3.10"]
    assert called_args(run_all) == ["ctr", "-n", "k8s.io", "images", "list", "-q"]
    docker = _archive(tmp_path / "a.tar", {"manifest.json": [
        {"Config": "c.json", "RepoTags": ["registry.k8s.io/pause:3.10"], "Layers": []}]})
    run_all.return_value = result()
    assert kos_images.import_images(docker) == ["registry.k8s.io/pause:3.10"]
    assert called_args(run_all) == ["ctr", "-n", "k8s.io", "images", "import", docker]
