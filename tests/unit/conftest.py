"""Import the formula's custom modules (they live in the state tree, not a package)."""

import importlib.util
import sys
from pathlib import Path

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
