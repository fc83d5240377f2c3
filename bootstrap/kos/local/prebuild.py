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

from .. import ui
from ..errors import KosError
from . import kubernetes, provider, rootfs
from .openstack import image as cloud_image


def main():
    started = time.monotonic()
    try:
        rootfs.layer().ensure()
        cloud_image.layer().ensure()
        provider.ensure()
        kubernetes.ensure()
    except KosError as exc:
        ui.error(exc.problem, exc.fix, exc.details)
        return exc.exit_code
    ui.ok(f"the rehearsal cloud's images, provider and Kubernetes are ready "
          f"({time.monotonic() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
