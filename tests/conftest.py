import logging
import shutil
import tempfile
from pathlib import Path

import pytest


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
