"""The extension's execution modules (saltext.kos, installed in this virtualenv) through
Salt's own loader, as a minion with the given id loads them."""

import os
import sys
from pathlib import Path

import salt.config
from saltfactories.utils.functional import Loaders


def formula_modules(monkeypatch, minion_id, pillar=None):
    """``__salt__`` of a minion ``minion_id`` that has the extension's modules (and
    ``pillar``, when given, as its pillar). This virtualenv's bin goes first on PATH:
    modules that load only where their daemon is installed (kos_syndic: salt-syndic) find
    the virtualenv's."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    opts = salt.config.minion_config(None)
    opts.update(id=minion_id, file_client="local")
    if pillar is not None:
        opts["pillar"] = pillar
    return Loaders(opts).modules
