"""
The release of the extension a salt master serves its minions: a wheel of the installed
``saltext.kos`` and one of each Python dependency it needs beyond Salt, with a
``release.yaml`` naming the version and each wheel's SHA-256. The formula's
``kos.extension`` state installs it on every minion from ``salt://kos/release/`` (no
package index, hashes checked), so a minion runs the very release the master runs.

The wheels are built from the installed distributions, not downloaded: the machine that
publishes a release (the operator's, through ``kos converge``, or a master through
``salt-run kos_release.publish``) needs no package index, and the same installed code makes
the same bytes (sorted entries, fixed timestamps and modes), so an unchanged release keeps
its hashes and the state tree's fingerprint. Only pure-Python dependencies can travel so:
one with compiled files is refused with its name. The wheel format:
https://packaging.python.org/en/latest/specifications/binary-distribution-format/
"""

import base64
import hashlib
import importlib.metadata
import io
import os
import re
import zipfile
from pathlib import Path

import yaml

NAME = "saltext.kos"
PACKAGE = ("saltext", "kos")
# Served under salt://kos/release/ (RELEASE_DIR of a state tree).
RELEASE_DIR = "kos/release"
INDEX = "release.yaml"
# A minion runs Salt already: the release never carries it.
PROVIDED = {"salt"}
# A fixed time for every entry (the earliest a zip file can say), so that the bytes depend on
# the contents alone.
EPOCH = (1980, 1, 1, 0, 0, 0)
WHEEL = "Wheel-Version: 1.0\nGenerator: kos\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
COMPILED = (".so", ".pyd", ".dylib")


class ReleaseError(Exception):
    """What stops a release from being built, and how to fix it."""


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _wheel_name(name):
    return re.sub(r"[-_.]+", "_", name)


def _record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _skipped(path):
    parts = Path(path).parts
    return "__pycache__" in parts or path.endswith((".pyc", ".pyo"))


def _extension_files():
    """The extension's own files, from its package directory (an editable install lists
    none of them among its distribution's files)."""
    import saltext.kos  # noqa: PLC0415 - this module is part of the package it reads

    root = Path(next(iter(saltext.kos.__path__)))
    found = {}
    for path in sorted(root.rglob("*")):
        rel = "/".join(PACKAGE + path.relative_to(root).parts)
        if path.is_file() and not _skipped(rel):
            found[rel] = path.read_bytes()
    return found


def _dependency_files(dist):
    found = {}
    for entry in dist.files or ():
        rel = entry.as_posix()
        if ".dist-info/" in rel or rel.startswith("..") or _skipped(rel):
            continue
        if rel.endswith(COMPILED):
            raise ReleaseError(
                f"{dist.metadata['Name']} {dist.version} has compiled files ({rel}): a release "
                "carries pure-Python dependencies only; install it on the minions some other "
                "way, or depend on a pure-Python library instead"
            )
        found[rel] = Path(dist.locate_file(entry)).read_bytes()
    return found


def _requirements(dist):
    """The distributions ``dist`` needs at run time, without extras and without Salt."""
    names = []
    for req in dist.requires or ():
        if ";" in req and "extra" in req.split(";", 1)[1]:
            continue
        name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", req).group(0)
        if _canonical(name) not in PROVIDED:
            names.append(name)
    return names


def _closure():
    """The extension and every distribution it needs, each once, extension first."""
    seen, order, todo = set(), [], [NAME]
    while todo:
        name = todo.pop(0)
        if _canonical(name) in seen:
            continue
        seen.add(_canonical(name))
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError as exc:
            raise ReleaseError(
                f"{name} is not installed here: install {NAME} with its dependencies "
                f"(pip install {NAME}) where the release is built"
            ) from exc
        order.append(dist)
        todo += _requirements(dist)
    return order


def wheel_bytes(dist, files):
    """A wheel of ``files`` (archive path -> bytes) with ``dist``'s metadata."""
    name, version = dist.metadata["Name"], dist.version
    info = f"{_wheel_name(name)}-{version}.dist-info"
    entries = dict(files)
    entries[f"{info}/METADATA"] = dist.read_text("METADATA").encode()
    entries[f"{info}/WHEEL"] = WHEEL.encode()
    for extra in ("entry_points.txt", "top_level.txt"):
        text = dist.read_text(extra)
        if text:
            entries[f"{info}/{extra}"] = text.encode()
    record = [f"{path},{_record_hash(data)},{len(data)}" for path, data in sorted(entries.items())]
    entries[f"{info}/RECORD"] = ("\n".join(record + [f"{info}/RECORD,,"]) + "\n").encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for path in sorted(entries, key=lambda p: (p.startswith(info), p)):
            member = zipfile.ZipInfo(path, EPOCH)
            member.external_attr = 0o644 << 16
            member.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(member, entries[path], compresslevel=9)
    return out.getvalue()


def build():
    """The release of what is installed here: ``(index, {file name: bytes})``, where
    ``index`` is the ``release.yaml`` document."""
    wheels, listed = {}, []
    for dist in _closure():
        files = _extension_files() if _canonical(dist.metadata["Name"]) == _canonical(NAME) \
            else _dependency_files(dist)
        data = wheel_bytes(dist, files)
        file = f"{_wheel_name(dist.metadata['Name'])}-{dist.version}-py3-none-any.whl"
        wheels[file] = data
        listed.append({"name": dist.metadata["Name"], "version": dist.version, "file": file,
                       "sha256": hashlib.sha256(data).hexdigest()})
    index = {"name": NAME, "version": listed[0]["version"], "wheels": listed}
    return index, wheels


def index_text(index):
    return ("# The release of saltext.kos this master serves (saltext.kos.utils.kos_release).\n"
            + yaml.safe_dump(index, sort_keys=False))


def files():
    """The release as state-tree files: ``{"kos/release/<name>": bytes}``."""
    index, wheels = build()
    out = {f"{RELEASE_DIR}/{name}": data for name, data in wheels.items()}
    out[f"{RELEASE_DIR}/{INDEX}"] = index_text(index).encode()
    return out


def write(state_root):
    """Write the release under ``state_root``/kos/release, replacing an older one there;
    returns the index."""
    target = Path(state_root) / RELEASE_DIR
    target.mkdir(parents=True, exist_ok=True)
    wanted = files()
    for old in target.iterdir():
        if f"{RELEASE_DIR}/{old.name}" not in wanted:
            old.unlink()
    for rel, data in wanted.items():
        path = Path(state_root) / rel
        if not path.exists() or path.read_bytes() != data:
            tmp = path.with_name(path.name + ".kos-tmp")
            tmp.write_bytes(data)
            os.replace(tmp, path)
    return yaml.safe_load(wanted[f"{RELEASE_DIR}/{INDEX}"])
