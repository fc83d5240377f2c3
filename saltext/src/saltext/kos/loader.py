"""
Where Salt's loader finds the extension's modules: the ``salt.loader`` entry point names
``dirs``, which Salt calls each time it builds a loader (a module refresh included) and
which returns ``{kind: [directory]}`` (salt/loader/__init__.py, ``_module_dirs``, the
"new style" callable entry point).

Why a callable rather than the package: a running minion that pip gives another release
(the formula's kos.extension, with reload_modules) reloads its modules from the new files,
but the utilities they import are plain Python, cached in ``sys.modules`` from the old
release. When the installed release is not the one imported, ``dirs`` drops every
``saltext.kos`` module first, so the reloaded modules and their utilities come from the
same release.
"""

import importlib
import importlib.metadata
import sys
from pathlib import Path

NAME = "saltext.kos"
KINDS = ("modules", "states", "runners", "returners", "engines", "utils")


def installed():
    try:
        return importlib.metadata.version(NAME)
    except importlib.metadata.PackageNotFoundError:
        return None


def forget_stale():
    """Drop the imported ``saltext.kos`` modules when another release is installed now;
    True when it did."""
    imported = getattr(sys.modules.get(NAME), "__version__", None)
    now = installed()
    if imported is None or now is None or imported == now:
        return False
    for name in [n for n in sys.modules if n == NAME or n.startswith(NAME + ".")]:
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
    return True


def dirs():
    """The extension's loader directories, by kind, of the release installed now."""
    forget_stale()
    package = importlib.import_module(NAME)
    root = Path(next(iter(package.__path__)))
    return {kind: [str(root / kind)] for kind in KINDS if (root / kind).is_dir()}
