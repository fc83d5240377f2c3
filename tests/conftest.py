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
# run (kos_local.prebuild): on a fresh machine they take minutes that the tests collected
# before the e2e ones can cover. kos up takes the same locks, so it waits for them.
_prebuild = {}
# The build is the run's longest path on a fresh machine (the kubeadm cluster waits for it,
# then runs the longest tests), and the tests beside it have time to spare: a higher
# priority (root may raise it, and the build only runs as root) gives it the larger share
# of the cores without starving the tests' timeouts.
PREBUILD_NICE = -5


# `make test` runs the tests in three processes (pytest -n 3 --dist loadgroup). A
# directory's tests share session fixtures (a salt master and minions, a lab, a cluster), so
# each directory is one unit of work and its set-ups run once. The units go out longest
# first, the end-to-end tests before all: they are the run's longest path (warm, about as
# long as the other directories share out over two processes), and on a fresh machine
# their cloud boots while the prebuild makes Kubernetes. The rest of the order is the warm
# time per directory of the run of 2026-12-02 (its "time per test directory"); a directory
# not listed goes last. Each distribution's integration tests (tests/integration/<subdir>)
# start a deployment of their own, so they are units of their own.
LONGEST_FIRST = ("e2e", "e2e/microk8s", "integration", "bootstrap",
                 "integration/kubeadm_upgrade", "functional", "integration/kubeadm", "standins",
                 "terraform", "unit")
SPLIT = ("integration",)
# The end-to-end tests of the microk8s cluster are a unit of their own: its cluster comes up
# beside the kubeadm one, on the same rehearsal cloud, in another process.
SPLIT_BY_PARAMETER = {"e2e": "microk8s"}


def unit_of_work(nodeid):
    # the path only: a parameter's id may hold a "/"
    path, _, rest = nodeid.partition("::")
    parts = path.split("/")
    if parts[0] != "tests" or len(parts) < 3:
        return "tests"
    if parts[1] in SPLIT and len(parts) > 3:
        return "/".join(parts[1:3])
    param = SPLIT_BY_PARAMETER.get(parts[1])
    if param and "[" in rest and param in rest[rest.index("["):].strip("[]").split("-"):
        return f"{parts[1]}/{param}"
    return parts[1]


def _rank(unit):
    return LONGEST_FIRST.index(unit) if unit in LONGEST_FIRST else len(LONGEST_FIRST)


# A scheduler rather than xdist_group marks: xdist names a test's group by rewriting its
# nodeid, which pytest 9 no longer reads back.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    # xdist would order the units by their number of tests; the workers' collection order
    # (pytest_collection_modifyitems) is the order wanted.
    config.option.loadscopereorder = False

    class DirectoryScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return unit_of_work(nodeid)

    return DirectoryScheduling(config, log)


def pytest_collection_modifyitems(session, config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: _rank(unit_of_work(item.nodeid)))
    else:
        # One process: the end-to-end tests last, so that on a fresh machine the tests
        # before them run while the prebuild makes the images and Kubernetes they wait for.
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
        ["nice", "-n", str(PREBUILD_NICE), sys.executable, "-m", "kos_local.prebuild"],
        cwd=repo, stdin=subprocess.DEVNULL,
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
        print(f"\nkos_local.prebuild exited {proc.returncode}: {Path(_prebuild['log']).read_text()[-2000:]}")
    else:
        # what the builds took (the budget of a fresh machine)
        last = Path(_prebuild["log"]).read_text().strip().splitlines()[-1:]
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter and last:
            reporter.ensure_newline()
            reporter.write_line(f"kos_local.prebuild: {last[0]}")
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



@pytest.fixture(scope="session")
def release_root():
    """A file root holding the extension's release as a master serves it (tests.release)."""
    from tests.release import release_root as built

    return built()
