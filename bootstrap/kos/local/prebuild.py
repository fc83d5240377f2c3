"""
``python -m kos.local.prebuild``: build what the rehearsal cloud needs once per machine
(the hosts' image, the cloud's image, the Terraform provider, Kubernetes from source for
the kubeadm distribution) without bringing up a cloud.

Each build takes the same lock as ``kos up --cloud local``, so a ``kos up`` that starts
while this runs waits for it and uses what it made. The test suite starts it in the
background when it will run the end-to-end tests, so a fresh machine's builds overlap
the tests before them instead of adding to them.
"""

import sys
import time
from concurrent.futures import ThreadPoolExecutor

from .. import ui
from ..errors import KosError
from . import kubernetes, provider, rootfs
from .openstack import image as cloud_image


def pending():
    """What the prebuild would build on this machine (empty: everything is cached)."""
    missing = [what for what, ready in (
        ("the hosts' image", rootfs.layer().ready()),
        ("the cloud's image", cloud_image.layer().ready()),
        ("the Terraform provider", provider.binary().exists()),
        ("Kubernetes", kubernetes.built(kubernetes.pinned_version())),
    ) if not ready]
    return missing


def images():
    rootfs.layer().ensure()
    cloud_image.layer().ensure()


def binaries():
    provider.ensure()
    kubernetes.ensure()


def main():
    """The two chains side by side: the images mostly wait on Debian's mirror and the
    disk, the Go builds on the CPU. One after the other, Kubernetes was ready 29 minutes
    into a fresh make test, and the first cluster waited for it."""
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="kos-prebuild") as pool:
        chains = [pool.submit(images), pool.submit(binaries)]
    for chain in chains:
        exc = chain.exception()
        if isinstance(exc, KosError):
            ui.error(exc.problem, exc.fix, exc.details)
            return exc.exit_code
        if exc is not None:
            raise exc
    ui.ok(f"the rehearsal cloud's images, provider and Kubernetes are ready "
          f"({time.monotonic() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
