"""
The OpenStack cloud-controller-manager for the rehearsal cloud's kubeadm clusters, built
from source (``k8s.io/cloud-provider-openstack`` through the Go module proxy) into the
image the formula's static Pod runs, beside the Kubernetes build of the same minor:
``<kubernetes build>/images/openstack-cloud-controller-manager.tar``, which the nodes
import with the rest.

It is a stage of its own, kept apart from the Kubernetes build's recipe: a machine that
built Kubernetes before adds it without building Kubernetes again. The same Go caches
serve both, so most of its dependencies are compiled already.
"""

import shutil
import time
from pathlib import Path

from kos import ui

MODULE = "k8s.io/cloud-provider-openstack"
COMMAND = "openstack-cloud-controller-manager"
# The release of cloud-provider-openstack for each Kubernetes minor (its releases follow
# Kubernetes': release-1.31 builds against k8s.io v0.31). The newest the module proxy
# serves: v1.31.3 and v1.31.4 are refused, and v1.32.0 needs Go 1.23.6.
RELEASES = {"1.31": "v1.31.2"}
ARCHIVE = f"{COMMAND}.tar"
# Where upstream's image has it (cloud-provider-openstack's
# cluster/images/openstack-cloud-controller-manager/Dockerfile), and where the formula's
# static Pod runs it from.
IMAGE_BIN_DIR = "/bin"


def _minor(version):
    return tuple(int(p) for p in version.lstrip("v").split(".")[:2])


def release(kubernetes_version):
    """The cloud-provider-openstack release for ``kubernetes_version``: its minor's, or the
    newest of an earlier minor (the cloud controller of a cluster upgraded to a minor
    without a served release stays the one it ran), or None before the first."""
    known = [m for m in RELEASES if _minor(m) <= _minor(kubernetes_version)]
    return RELEASES[max(known, key=_minor)] if known else None


def image_ref(formula_image, version):
    """The formula's image (``ccm:image``) at ``version``: the repository is the formula's,
    so the rehearsal's pillar changes the tag only."""
    return f"{formula_image.rsplit(':', 1)[0]}:{version}"


def built(build_dir):
    return (Path(build_dir) / "images" / ARCHIVE).exists()


def ensure(build, go, env, build_dir, kubernetes_version, formula_image):
    """Build the image into ``build_dir/images`` unless it is there (``build``: the
    ``image.Build`` the caller logs into, under its lock). A minor without a known release
    gets none: its cluster keeps the image an earlier minor's build imported."""
    version = release(kubernetes_version)
    if version is None or built(build_dir):
        return None
    from .kubernetes import build_command, write_image

    started = time.monotonic()
    work = Path(build_dir) / f".{COMMAND}.building"
    shutil.rmtree(work, ignore_errors=True)
    try:
        ldflags = [f"-X k8s.io/component-base/version.gitVersion={version}",
                   f"-X {MODULE}/pkg/version.Version={version}"]
        build_command(build, go, env, MODULE, version, COMMAND, work, ldflags)
        ref = image_ref(formula_image, version)
        write_image(Path(build_dir) / "images" / ARCHIVE, ref,
                    {"bin": [COMMAND], "bin_dir": IMAGE_BIN_DIR}, work / "bin")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ui.ok(f"{COMMAND} {version} built in {time.monotonic() - started:.0f}s")
    return ref
