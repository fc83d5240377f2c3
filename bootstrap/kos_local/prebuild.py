"""
``python -m kos_local.prebuild``: build what the rehearsal cloud needs once per machine
(the hosts' image, the cloud's image, the Terraform provider, Kubernetes from source for
the kubeadm distribution) without bringing up a cloud.

Each build takes the same lock as ``kos up --cloud local``, so a ``kos up`` that starts
while this runs waits for it and uses what it made. The test suite starts it in the
background when it will run the end-to-end tests, so a fresh machine's builds overlap
the tests before them instead of adding to them.
"""

import signal
import sys
import time

from kos import ui
from kos.errors import EXIT_INTERRUPTED, KosError, PreflightError
from kos.ssh import take_interrupts
from . import kubernetes, once_per_machine


def _here():
    """The builds this process makes, in order, as (what, ready, ensure): the images mostly
    wait on Debian's mirror and the disk, and run while Kubernetes builds in a process of
    its own on the CPU. One after the other, Kubernetes was ready 29 minutes into a fresh
    make test, and the first cluster waited for it."""
    return once_per_machine()


def _interrupted(build):
    """The Kubernetes build runs in a session of its own (a Ctrl-C in a terminal does not
    reach it twice): pass the interrupt on once and wait for its own cleanup, so nothing
    builds on after this process ended and no half-made build stays behind."""
    if build is not None and build.poll() is None:
        build.send_signal(signal.SIGINT)
        build.wait()


def main():
    # The test suite stops it with SIGINT, and a suite started in a shell's background
    # hands it SIGINT ignored: take it back, with SIGTERM, as KeyboardInterrupt.
    take_interrupts()
    started = time.monotonic()
    version = kubernetes.pinned_version()
    build = kubernetes.start(version)
    failed = None
    try:
        for _, _, ensure in _here():
            try:
                ensure()
            except KosError as exc:
                failed = exc
                break
        # A failure above still lets the Kubernetes build finish: the re-run uses it.
        if build is not None and build.wait() != 0 and failed is None:
            tail = kubernetes.log_path(version, "start.log").read_text().strip().splitlines()
            failed = PreflightError(f"building Kubernetes {version} failed",
                                    fix="see the build's log it names and re-run",
                                    details=tail[-15:])
        if failed is None:
            kubernetes.ensure(version)
    except BaseException as exc:
        _interrupted(build)
        if not isinstance(exc, KeyboardInterrupt):
            raise
        ui.warn("interrupted: what was half-built is removed; a re-run builds the rest")
        return EXIT_INTERRUPTED
    if failed is not None:
        ui.error(failed.problem, failed.fix, failed.details)
        return failed.exit_code
    ui.ok(f"the rehearsal cloud's images, provider and Kubernetes are ready "
          f"({time.monotonic() - started:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
