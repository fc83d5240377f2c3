"""
The Cinder CSI for the rehearsal cloud's kubeadm clusters, built from source beside the
Kubernetes build of the same minor, one archive per image under ``<build>/images`` (the
nodes import them with the rest):

- ``cinder-csi-plugin`` from ``k8s.io/cloud-provider-openstack`` (the cloud controller's
  release), with the programs its node service runs to format, check, mount and grow a
  volume, as upstream's image carries them (cloud-provider-openstack's
  ``tools/csi-deps.sh``), copied from this machine's Debian with their libraries;
- the sidecars ``csi-provisioner``, ``csi-attacher`` and ``csi-resizer`` at the versions of
  the formula's images (``kubeadm:csi:images``), through the Go module proxy;
- ``kos-csi-registrar`` (``registrar/``), the one piece of kos's own: the proxy serves no
  release of ``node-driver-registrar``. The rehearsal's pillar names it in place of
  upstream's image; on OpenStack the formula runs upstream's.

Upstream's sidecar images have their program at the image's root as the entrypoint, and
its plugin image ``/bin/cinder-csi-plugin``, started by the manifest's args; these are
laid out the same, so the formula's manifests serve both.
"""

import hashlib
import shutil
import time
from pathlib import Path

from kos import ui
from . import cloud_provider

PLUGIN = "cinder-csi-plugin"
REGISTRAR = "kos-csi-registrar"
REGISTRAR_SRC = Path(__file__).resolve().parent / "registrar"
# formula image key: (program, Go module); each image has its program at its root
SIDECARS = {
    "provisioner": ("csi-provisioner", "github.com/kubernetes-csi/external-provisioner/v5"),
    "attacher": ("csi-attacher", "github.com/kubernetes-csi/external-attacher/v4"),
    "resizer": ("csi-resizer", "github.com/kubernetes-csi/external-resizer"),
}
# What the node service runs (k8s.io/mount-utils: blkid, fsck, mkfs.*, mount, resize2fs,
# xfs_growfs, blockdev, dumpe2fs, xfs_io; the plugin's pkg/util/mount: findmnt), from the
# Debian packages util-linux, mount, e2fsprogs and xfsprogs. Not udevadm: the plugin only
# logs a failed ``udevadm trigger`` and looks for the disk again, and the rehearsal's
# hosts get their /dev/disk/by-id links from the materialiser, not from udev.
TOOLS = ("mount", "umount", "blkid", "blockdev", "findmnt", "fsck", "fsck.ext4", "fsck.xfs",
         "e2fsck", "mke2fs", "mkfs.ext4", "mkfs.xfs", "resize2fs", "dumpe2fs", "xfs_growfs",
         "xfs_io", "xfs_repair")
TOOL_PATH = "/usr/sbin:/sbin:/usr/bin:/bin"
TOOL_FILES = ("/etc/mke2fs.conf",)


def _tag(ref):
    return ref.rsplit(":", 1)[1]


def registrar_ref():
    """The registrar's image, named by its source's digest: a change to it is a new image."""
    digest = hashlib.sha256()
    for path in sorted(REGISTRAR_SRC.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return f"kos.local/{REGISTRAR}:{digest.hexdigest()[:12]}"


def images(formula_images, kubernetes_version):
    """``{formula key: image reference}`` the rehearsal's pillar names: the formula's
    sidecars as they are, its plugin at the cloud controller's release, this registrar.
    None before the first release of cloud-provider-openstack."""
    version = cloud_provider.release(kubernetes_version)
    if version is None:
        return None
    refs = {key: formula_images[key] for key in SIDECARS}
    refs["plugin"] = cloud_provider.image_ref(formula_images["plugin"], version)
    refs["registrar"] = registrar_ref()
    return refs


def _archive(key):
    return f"cinder-csi-{key}.tar"


def built(build_dir, formula_images, kubernetes_version):
    refs = images(formula_images, kubernetes_version) or {}
    return all(_marker(build_dir, key, ref).exists() for key, ref in refs.items())


def _marker(build_dir, key, ref):
    """The archive of ``key`` at ``ref``: a new reference (another version, another
    registrar) is another build."""
    name = hashlib.sha256(ref.encode()).hexdigest()[:12]
    return Path(build_dir) / "images" / f".{_archive(key)}.{name}"


def _tool_files():
    from .kubernetes import host_programs

    files = host_programs(TOOLS, TOOL_PATH)
    for path in TOOL_FILES:
        if Path(path).exists():
            files[path] = (Path(path).read_bytes(), 0o644)
    return files


def missing_tools():
    return [name for name in TOOLS if shutil.which(name, path=TOOL_PATH) is None]


def ensure(build, go, env, local_env, build_dir, kubernetes_version, formula_images):
    """The images into ``build_dir/images`` unless they are there (``build``: the
    ``image.Build`` the caller logs into, under its lock; ``env`` the cloud controller's Go,
    ``local_env`` this machine's, which the sidecars' newest releases need)."""
    from .kubernetes import build_command, write_image

    refs = images(formula_images, kubernetes_version)
    if refs is None:
        return None
    missing = missing_tools()
    if missing:
        build.fail(f"the Cinder CSI's image needs {', '.join(missing)} on this machine "
                   "(apt-get install util-linux mount e2fsprogs xfsprogs)")
    started = time.monotonic()
    images_dir = Path(build_dir) / "images"
    work = Path(build_dir) / ".cinder-csi.building"
    shutil.rmtree(work, ignore_errors=True)
    try:
        for key, ref in sorted(refs.items()):
            marker = _marker(build_dir, key, ref)
            if marker.exists():
                continue
            spec = {"bin_dir": "/"}
            if key == "plugin":
                version = _tag(ref)
                build_command(
                    build, go, env, cloud_provider.MODULE, version, PLUGIN, work,
                    [f"-X {cloud_provider.MODULE}/pkg/version.Version={version}"])
                # no entrypoint: upstream's manifests start it by its path in args
                spec = {"bin": [PLUGIN], "bin_dir": "/bin", "files": _tool_files()}
            elif key == "registrar":
                with build.stage(REGISTRAR):
                    (work / "bin").mkdir(parents=True, exist_ok=True)
                    build.run(go, "build", "-ldflags", "-s -w", "-o", work / "bin" / REGISTRAR,
                              ".", env=local_env, timeout=1800, cwd=REGISTRAR_SRC)
                spec["bin"] = [REGISTRAR]
            else:
                program, module = SIDECARS[key]
                build_command(build, go, local_env, module, _tag(ref), program, work)
                spec["bin"] = [program]
            if key != "plugin":
                spec["entrypoint"] = [f"/{spec['bin'][0]}"]
            write_image(images_dir / _archive(key), ref, spec, work / "bin")
            for old in images_dir.glob(f".{_archive(key)}.*"):
                old.unlink()
            marker.write_text(ref + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ui.ok(f"the Cinder CSI's images built in {time.monotonic() - started:.0f}s")
    return refs
