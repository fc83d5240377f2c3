"""
The formula's kos.extension through Salt's real loaders: a minion that has the release
the master serves installs nothing and never asks pip; one with another release fetches
every wheel (hash-checked) and installs that version from them, with no index.
"""

import hashlib
import shutil
from pathlib import Path

import yaml

from tests.functional.minion import local_loaders
from tests.functional.test_pillar_schema_functional import TREE


def loaders_for(root, release):
    (root / "pillar").mkdir()
    (root / "pillar" / "top.sls").write_text("base: {}\n")
    return local_loaders(root, "k8s-worker-1.kos.internal",
                         file_roots={"base": [str(TREE), str(release)]},
                         pillar_roots={"base": [str(root / "pillar")]})


def by_function(shown):
    """{state id: "module.function"} of a state.show_sls result."""
    out = {}
    for sid, body in shown.items():
        for module, args in body.items():
            if module.startswith("__"):
                continue
            out[sid] = module + "." + next(a for a in args if isinstance(a, str))
    return out


def test_a_minion_with_the_served_release_installs_nothing(tmp_path, release_root):
    loaders = loaders_for(tmp_path, release_root)
    index = yaml.safe_load((release_root / "kos" / "release" / "release.yaml").read_text())
    assert loaders.modules.kos.installed_release() == str(index["version"])
    shown = loaders.modules.state.show_sls("kos.extension")
    assert by_function(shown) == {"kos-extension-installed": "test.succeed_without_changes"}
    ran = loaders.modules.state.sls("kos.extension")
    assert [(r.id, r.result, r.changes) for r in ran] == [("kos-extension-installed", True, {})]


def test_a_minion_with_another_release_installs_the_served_one(tmp_path, release_root):
    other = tmp_path / "release"
    shutil.copytree(release_root, other)
    index_file = other / "kos" / "release" / "release.yaml"
    index = yaml.safe_load(index_file.read_text())
    index["version"] = "99.0.0"
    index_file.write_text(yaml.safe_dump(index))
    loaders = loaders_for(tmp_path, other)
    shown = loaders.modules.state.show_sls("kos.extension")
    functions = by_function(shown)
    wheels = {f"kos-extension-wheel-{w['file']}" for w in index["wheels"]}
    assert functions == {**{w: "file.managed" for w in wheels},
                         "kos-extension-installed": "pip.installed"}
    pip = {k: v for arg in shown["kos-extension-installed"]["pip"] if isinstance(arg, dict)
           for k, v in arg.items()}
    assert pip["name"] == "saltext.kos==99.0.0"
    assert pip["no_index"] is True and pip["find_links"].endswith("/kos-release")
    for wheel in index["wheels"]:
        sid = f"kos-extension-wheel-{wheel['file']}"
        managed = {k: v for arg in shown[sid]["file"] if isinstance(arg, dict)
                   for k, v in arg.items()}
        assert managed["source_hash"] == f"sha256={wheel['sha256']}"
        # fetched from the master's file server into the minion's cache, hash checked
        ran = loaders.modules.state.sls_id(sid, "kos.extension")
        assert ran.result is True and ran.changes, ran
        data = (Path(pip["find_links"]) / wheel["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == wheel["sha256"]
