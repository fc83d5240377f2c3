"""The release a master serves its minions (saltext.kos.utils.kos_release): the same
installed code makes the same bytes, release.yaml names each wheel's hash, and pip installs
it with no package index."""

import hashlib
import subprocess
import sys
import types
from pathlib import PurePosixPath

import pytest
import yaml
from saltext.kos.utils import kos_release


def test_the_same_installed_code_makes_the_same_release():
    assert kos_release.files() == kos_release.files()


def test_release_yaml_names_each_wheel_with_its_hash(tmp_path):
    index = kos_release.write(tmp_path)
    served = tmp_path / "kos" / "release"
    assert index == yaml.safe_load((served / "release.yaml").read_text())
    assert index["name"] == "saltext.kos"
    assert [w["name"] for w in index["wheels"]] == ["saltext.kos", "fastjsonschema"]
    for wheel in index["wheels"]:
        assert hashlib.sha256((served / wheel["file"]).read_bytes()).hexdigest() == wheel["sha256"]
    # a second write leaves exactly the release, whatever an older one left there
    (served / "saltext_kos-0.0.9-py3-none-any.whl").write_bytes(b"old")
    kos_release.write(tmp_path)
    assert sorted(p.name for p in served.iterdir()) == sorted(
        ["release.yaml"] + [w["file"] for w in index["wheels"]])


def test_pip_installs_the_release_with_no_index_and_salt_finds_its_entry_point(tmp_path):
    index = kos_release.write(tmp_path)
    target = tmp_path / "site"
    # --no-deps: the target is not where Salt, a requirement of the extension, is installed
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
         "--find-links", str(tmp_path / "kos" / "release"), "--target", str(target),
         f"saltext.kos=={index['version']}", "fastjsonschema"],
        check=True, capture_output=True, text=True)
    info = target / f"saltext_kos-{index['version']}.dist-info"
    assert "[salt.loader]\nsaltext.kos = saltext.kos" in (info / "entry_points.txt").read_text()
    assert (target / "saltext" / "kos" / "runners" / "kos_plan.py").is_file()
    assert (target / "fastjsonschema" / "__init__.py").is_file()


def test_a_dependency_with_compiled_files_is_refused_by_name(tmp_path):
    (tmp_path / "fast").mkdir()
    (tmp_path / "fast" / "_speed.so").write_bytes(b"\x7fELF")
    dist = types.SimpleNamespace(
        metadata={"Name": "fast"}, version="1.0",
        files=[PurePosixPath("fast/_speed.so")],
        locate_file=lambda entry: tmp_path / entry)
    with pytest.raises(kos_release.ReleaseError, match=r"fast 1\.0 has compiled files"):
        kos_release._dependency_files(dist)
