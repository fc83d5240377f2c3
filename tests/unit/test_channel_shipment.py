"""
What ``kos.channel`` ships to the salt master: the program and every kos module it imports,
each before its importers, using nothing else of kos (kos is not installed there); and the
program, loaded the way the SSH session loads it, answers. The channel against a real master
is tests/bootstrap/test_channel.py.
"""

import ast
import sys
from pathlib import Path

from kos import channel
from kos.channel import MODULES, PROGRAM, Channel

from tests.bootstrap.test_channel import BIN, LocalSession

KOS = Path(channel.__file__).parent


def imports(name):
    """(kos modules, other top-level packages) that module ``name`` imports."""
    tree = ast.parse(channel.source(name))
    package = name.rpartition(".")[0]
    local, other = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            assert node.level == 1, f"{name}: {ast.unparse(node)}"
            local.add(f"{package}.{node.module}")
        elif isinstance(node, ast.ImportFrom):
            other.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            other.update(alias.name.split(".")[0] for alias in node.names)
    return local, other


def test_every_module_the_program_imports_is_shipped_before_its_importers():
    shipped = []
    for name in (*MODULES, PROGRAM):
        local, other = imports(name)
        assert local <= set(shipped), f"{name} imports {local - set(shipped)} before they arrive"
        assert other <= sys.stdlib_module_names | {"salt"}, f"{name} imports {other}"
        shipped.append(name)
    onmaster = {f"kos.{p.stem}" for p in KOS.glob("onmaster_*.py")}
    assert onmaster <= set(MODULES)


def test_the_shipped_program_loads_and_answers_without_a_running_master(tmp_path):
    config = tmp_path / "master"
    config.write_text(f"id: kos-shipment\nroot_dir: {tmp_path}\n")
    # As on the master, kos is not installed: a kos module that was not shipped fails to import
    # (PYTHONPATH comes before the virtualenv's site-packages, where kos is installed).
    shadow = tmp_path / "shadow" / "kos"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('kos is not on the salt master')\n")
    session = LocalSession(
        {
            "PATH": f"{BIN}:/usr/bin:/bin",
            "PYTHONPATH": str(shadow.parent),
            "SALT_MASTER_CONFIG": str(config),
        }
    )
    chan = Channel(session).open()
    try:
        assert chan.info["event"] == "ready"
        assert chan.request("hello") == {"master": "kos-shipment", "config": str(config)}
    finally:
        chan.close()
