"""python -m kos.local.prebuild: the images and the Go builds side by side."""

import threading

from kos.errors import PreflightError
from kos.local import prebuild


def test_the_images_and_the_builds_run_side_by_side(monkeypatch, capsys):
    # each chain waits for the other to have started: one after the other would time out
    both = threading.Barrier(2, timeout=10)
    ran = []

    def chain(name):
        def run():
            both.wait()
            ran.append(name)
        return run

    monkeypatch.setattr(prebuild, "images", chain("images"))
    monkeypatch.setattr(prebuild, "binaries", chain("binaries"))
    assert prebuild.main() == 0
    assert sorted(ran) == ["binaries", "images"]
    assert "images, provider and Kubernetes are ready" in capsys.readouterr().err


def test_a_chain_that_fails_says_why_once_the_other_ended(monkeypatch, capsys):
    other = threading.Event()

    def images():
        raise PreflightError("debootstrap failed", fix="check the Debian mirror")

    def binaries():
        other.wait(1)
        other.set()

    monkeypatch.setattr(prebuild, "images", images)
    monkeypatch.setattr(prebuild, "binaries", binaries)
    code = prebuild.main()
    out = capsys.readouterr()
    assert code == PreflightError.exit_code and other.is_set()
    assert "debootstrap failed" in out.out + out.err
    assert "ready" not in out.out + out.err
