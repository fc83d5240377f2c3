"""python -m kos_local.prebuild: the images beside the Kubernetes build, and what an
interrupt or a failure leaves."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kos.errors import EXIT_INTERRUPTED, PreflightError
from kos_local import kubernetes, prebuild

BOOTSTRAP = Path(prebuild.__file__).resolve().parents[2]


def _build_process(script):
    """A stand-in for ``python -m kos_local.kubernetes``, started as ``kubernetes.start``
    starts it (a session of its own)."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)],
                            start_new_session=True)


def _wait_for(path, seconds=20):
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.fixture
def ensured(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    # (in this process: pytest's own signal handlers stay)
    monkeypatch.setattr(prebuild, "take_interrupts", lambda: None)
    calls = []
    monkeypatch.setattr(kubernetes, "ensure", lambda version=None: calls.append(version))
    return calls


def test_the_images_are_built_while_kubernetes_builds_in_its_own_process(
        monkeypatch, tmp_path, capsys, ensured):
    # each side waits for the other to have started: one after the other would time out
    building, imaging = tmp_path / "building", tmp_path / "imaging"
    monkeypatch.setattr(kubernetes, "start", lambda version=None: _build_process(f"""
        import pathlib, sys, time
        pathlib.Path({str(building)!r}).touch()
        deadline = time.monotonic() + 20
        while not pathlib.Path({str(imaging)!r}).exists():
            if time.monotonic() > deadline:
                sys.exit(1)
            time.sleep(0.05)
    """))

    def image():
        imaging.touch()
        _wait_for(building)

    monkeypatch.setattr(prebuild, "_here", lambda: [("an image", lambda: False, image)])
    assert prebuild.main() == 0
    assert ensured == [kubernetes.pinned_version()]
    assert "images, provider and Kubernetes are ready" in capsys.readouterr().err


def test_an_interrupt_reaches_the_kubernetes_build_and_leaves_nothing_running(tmp_path):
    """As the test suite's sessionfinish stops it: SIGINT to the prebuild's PID only, in a
    suite started as a shell's background job (SIGINT ignored, and so in what it starts).
    The build's own cleanup runs, and the prebuild ends only after it."""
    started, cleaned, pid = (tmp_path / n for n in ("started", "cleaned", "pid"))
    # kubernetes.main as ``python -m kos_local.kubernetes`` runs it, building for a minute
    build = f"""
        import os, pathlib, sys, time
        from kos_local import kubernetes

        def ensure(version=None):
            pathlib.Path({str(pid)!r}).write_text(str(os.getpid()))
            try:
                # (inside: an interrupt just after the test sees it still gets the cleanup)
                pathlib.Path({str(started)!r}).touch()
                time.sleep(60)
            except KeyboardInterrupt:
                time.sleep(0.5)  # a cleanup that takes a moment
                pathlib.Path({str(cleaned)!r}).touch()
                raise

        kubernetes.ensure = ensure
        sys.exit(kubernetes.main([]))
    """
    script = textwrap.dedent(f"""
        import signal, subprocess, sys, textwrap, time
        from kos_local import kubernetes, prebuild
        kubernetes.start = lambda version=None: subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent({build!r})], start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        prebuild._here = lambda: [("an image", lambda: False, lambda: time.sleep(60))]
        sys.exit(prebuild.main())
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
                            env={**os.environ, "PYTHONPATH": str(BOOTSTRAP),
                                 "XDG_CACHE_HOME": str(tmp_path / "cache")},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        _wait_for(started)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = proc.stdout.read().decode()
    assert proc.returncode == EXIT_INTERRUPTED, out
    assert "interrupted: what was half-built is removed" in out and "Traceback" not in out
    assert cleaned.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid.read_text()), 0)


def test_a_failed_image_is_reported_once_the_kubernetes_build_ended(
        monkeypatch, tmp_path, capsys, ensured):
    finished = tmp_path / "finished"
    monkeypatch.setattr(kubernetes, "start", lambda version=None: _build_process(f"""
        import pathlib, time
        time.sleep(0.5)
        pathlib.Path({str(finished)!r}).touch()
    """))

    def image():
        raise PreflightError("debootstrap failed", fix="check the Debian mirror")

    monkeypatch.setattr(prebuild, "_here", lambda: [("an image", lambda: False, image)])
    code = prebuild.main()
    out = capsys.readouterr()
    assert code == PreflightError.exit_code and finished.exists()
    assert "debootstrap failed" in out.out + out.err
    assert "ready" not in out.out + out.err


def test_a_failed_kubernetes_build_is_reported_with_its_log(
        monkeypatch, tmp_path, capsys, ensured):
    version = kubernetes.pinned_version()
    log = kubernetes.log_path(version, "start.log")
    log.parent.mkdir(parents=True)
    log.write_text("building Kubernetes\nERROR go build ./cmd/kubelet failed: see kubelet.log\n")
    monkeypatch.setattr(kubernetes, "start", lambda version=None: _build_process(
        "import sys; sys.exit(3)"))
    monkeypatch.setattr(prebuild, "_here", lambda: [("an image", lambda: True, lambda: None)])
    code = prebuild.main()
    out = capsys.readouterr()
    assert code == PreflightError.exit_code and ensured == []
    assert f"building Kubernetes {version} failed" in out.out + out.err
    assert "go build ./cmd/kubelet failed" in out.out + out.err

