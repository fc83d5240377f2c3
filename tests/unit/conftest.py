"""Import the formula's custom modules (they live in the state tree, not a package), and
load its shared helpers the way a minion does: through Salt's utils loader (``__utils__``)."""

import functools
import importlib.util
import sys
import tempfile
from pathlib import Path

import salt.config
import salt.loader

SALT_TREE = Path(__file__).resolve().parents[2] / "salt" / "salt"


def load(kind, name):
    """Load salt/salt/_<kind>/<name>.py as module ``kos_<kind>_<name>``."""
    modname = f"kos_{kind}_{name}"
    if modname in sys.modules:
        return sys.modules[modname]
    spec = importlib.util.spec_from_file_location(modname, SALT_TREE / f"_{kind}" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    spec.loader.exec_module(module)
    return module


_EXTMODS = tempfile.TemporaryDirectory(prefix="kos-unit-extmods-")


@functools.cache
def utils():
    """``__utils__`` as Salt's loader builds it, with salt/salt/_utils on its path."""
    opts = salt.config.minion_config(None)
    opts["utils_dirs"] = [str(SALT_TREE / "_utils")]
    # not this machine's minion cache: a copy synced there earlier would shadow the tree's
    opts["extension_modules"] = _EXTMODS.name
    return salt.loader.utils(opts)
