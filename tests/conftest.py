import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# The rehearsal cloud's builds, started in the background when the end-to-end tests will
# run (kos.local.prebuild): on a fresh machine they take minutes that the tests collected
# before the e2e ones can cover. kos up takes the same locks, so it waits for them.
_prebuild = {}


# `make test` runs the tests in two processes (pytest -n 2 --dist loadgroup). A directory's
# tests share session fixtures (a salt master and minions, a lab, a cluster), so each
# directory is one unit of work and its set-ups run once. The end-to-end tests are the
# longest unit: the short directories ride with them so that they start first (xdist hands
# out the unit with the most tests first) while the other process works through the rest.
# (On a fresh machine the cluster waits for the prebuild's images and Kubernetes anyway:
# the short directories, the kubeadm upgrade's Salt lab included, fill that wait. With the
# caches warm the cloud unit is the run's longest path: tests/functional, 4-5 minutes under
# load, goes to the other process, which ended 11 minutes earlier on 2026-11-28; measured
# per directory, see the run's "time per test directory".)
XDIST_UNITS = {"e2e": "cloud", "unit": "cloud", "standins": "cloud", "terraform": "cloud",
               "integration_kubeadm_upgrade": "cloud"}
# While the prebuild still has to build (a fresh machine), the cloud unit's process waits
# for it some 10-14 minutes once its short directories are done: tests/functional fills
# that wait there. On 2026-12-01 it ran in the other process, which then carried 3543 s
# against the cloud unit's 3528 s, and a fresh make test took 63 minutes.
FRESH_UNITS = {"functional": "cloud"}


def unit_of_work(nodeid, fresh=False):
    parts = nodeid.split("/")
    top = parts[1] if parts[0] == "tests" and len(parts) > 2 else "tests"
    return (fresh and FRESH_UNITS.get(top)) or XDIST_UNITS.get(top, top)


def _prebuild_pending():
    if os.geteuid() != 0:
        return []
    from kos.local import prebuild

    try:
        return prebuild.pending()
    except Exception:  # noqa: BLE001 - a machine that cannot tell schedules as usual
        return []


# A scheduler rather than xdist_group marks: xdist names a test's group by rewriting its
# nodeid, which pytest 9 no longer reads back.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    fresh = bool(_prebuild_pending())

    class DirectoryScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return unit_of_work(nodeid, fresh)

    return DirectoryScheduling(config, log)


def pytest_collection_modifyitems(session, config, items):
    # The short directories of the end-to-end unit go before its clusters: on a fresh
    # machine they run while the prebuild makes the images the first cluster waits for.
    items.sort(key=lambda item: item.nodeid.startswith("tests/e2e/"))


# Where the run's time went, per test directory and process: the figure the time budget of
# `make test` is kept by (printed, never asserted).
_spans = {}


def pytest_runtest_logreport(report):
    worker = getattr(getattr(report, "node", None), "gateway", None)
    key = (report.nodeid.split("::")[0].rsplit("/", 1)[0], worker.id if worker else "main")
    first, last, busy = _spans.get(key, (report.start, report.stop, 0.0))
    _spans[key] = (min(first, report.start), max(last, report.stop), busy + report.duration)


def pytest_terminal_summary(terminalreporter):
    if not _spans:
        return
    begin = min(first for first, _, _ in _spans.values())
    terminalreporter.section("time per test directory")
    for (unit, worker), (first, last, busy) in sorted(_spans.items(), key=lambda kv: kv[1][0]):
        terminalreporter.write_line(
            f"{worker:>5} {unit:<32} from {first - begin:6.0f}s to {last - begin:6.0f}s "
            f"({last - first:5.0f}s, tests {busy:5.0f}s)")


def pytest_collection_finish(session):
    if hasattr(session.config, "workerinput"):
        return
    _start_prebuild([item.nodeid for item in session.items])


# Under xdist the controller collects nothing itself: its workers report what they collected.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    _start_prebuild(ids)


def _start_prebuild(nodeids):
    if os.geteuid() != 0 or "proc" in _prebuild:
        return
    if not any(nodeid.startswith("tests/e2e/") for nodeid in nodeids):
        return
    fd, log = tempfile.mkstemp(prefix="kos-prebuild-", suffix=".log")
    repo = Path(__file__).resolve().parent.parent
    _prebuild["log"] = log
    _prebuild["proc"] = subprocess.Popen(
        [sys.executable, "-m", "kos.local.prebuild"], cwd=repo, stdin=subprocess.DEVNULL,
        stdout=fd, stderr=subprocess.STDOUT, start_new_session=True,
    )
    os.close(fd)


def pytest_sessionfinish(session):
    proc = _prebuild.pop("proc", None)
    if proc is None:
        return
    if proc.poll() is None:
        # A run that stopped before its e2e tests: the build's own cleanup (SIGINT is its
        # KeyboardInterrupt) leaves no half-made layer and no mount behind.
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    elif proc.returncode != 0:
        print(f"\nkos.local.prebuild exited {proc.returncode}: {Path(_prebuild['log']).read_text()[-2000:]}")
    else:
        # what the builds took (the budget of a fresh machine)
        last = Path(_prebuild["log"]).read_text().strip().splitlines()[-1:]
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter and last:
            reporter.ensure_newline()
            reporter.write_line(f"kos.local.prebuild: {last[0]}")
    Path(_prebuild.pop("log")).unlink(missing_ok=True)


def pytest_unconfigure(config):
    # Salt flushes its log handlers at exit, after pytest closed the captured
    # streams they point at; the resulting "--- Logging error ---" dumps are noise.
    logging.raiseExceptions = False


@pytest.fixture(scope="session")
def salt_factories_config():
    # salt-factories roots its daemons and its launch scripts in /tmp by default, and keeps a
    # script it finds there: a run from another checkout then started the other checkout's
    # Salt. Each run gets a root of its own, short: the daemons' unix sockets live under it.
    root = Path(tempfile.mkdtemp(prefix="kos-salt-", dir="/tmp"))
    yield {"root_dir": root}
    shutil.rmtree(root, ignore_errors=True)
