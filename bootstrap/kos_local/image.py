"""
Cached root filesystems for the rehearsal cloud, built once from this machine's apt mirror
and kept under ``~/.cache/kos/images``.

An image is a stack of layers. The bottom layer is a debootstrap; every layer above it is
the upper directory of an overlay in which its build steps ran, so a change to a late step
(a configuration file, a driver) rebuilds only that layer. Each layer's directory name
carries a digest of everything its steps depend on, so a changed recipe is a new image and
an old one is never patched in place. Machines mount ``lowerdir=<top>:...:<bottom>``.

A build writes every command's output to ``<layer>.log`` beside the layer; a failure is
reported with the failing step and that path, and leaves no half-made layer behind.
"""

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from kos import ui
from kos.errors import PreflightError
from . import provider

MARKER = ".kos-layer"


def cache_root():
    return provider.cache_root() / "images"


def apt_source():
    """``(mirror, suite)`` of the machine's own apt configuration (deb822 or one-line)."""
    mirror = os.environ.get("KOS_LOCAL_MIRROR")
    suite = os.environ.get("KOS_LOCAL_SUITE")
    if mirror and suite:
        return mirror, suite
    for path in _apt_files():
        text = path.read_text()
        for block in re.split(r"\n\s*\n", text):
            uris = re.search(r"^URIs:\s*(\S+)", block, re.M)
            suites = re.search(r"^Suites:\s*(\S+)", block, re.M)
            enabled = re.search(r"^Enabled:\s*no", block, re.M | re.I)
            if uris and suites and not enabled and "security" not in uris.group(1):
                return mirror or uris.group(1), suite or suites.group(1)
        for line in text.splitlines():
            m = re.match(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)\s", line)
            if m and "security" not in m.group(1):
                return mirror or m.group(1), suite or m.group(2)
    raise PreflightError(
        "cannot find a Debian mirror in /etc/apt/sources.list(.d)",
        fix="set KOS_LOCAL_MIRROR (e.g. http://deb.debian.org/debian) and KOS_LOCAL_SUITE "
        "(e.g. bookworm)",
    )


def _apt_files():
    paths = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    return [p for p in paths if p.suffix in (".list", ".sources") and p.is_file()]


def apt_sources():
    """``{path: text}``: the machine's apt sources (updates and security included), for an
    image's own apt, at the same paths (one-line or deb822 format alike)."""
    if os.environ.get("KOS_LOCAL_MIRROR"):
        mirror, suite = apt_source()
        return {"/etc/apt/sources.list": f"deb {mirror} {suite} main\n"}
    return {str(p): p.read_text() for p in _apt_files()}


class BuildFailed(PreflightError):
    pass


class Build:
    """One layer's build: runs commands into the layer's log, names the failing step."""

    def __init__(self, layer, root, log):
        self.layer = layer
        self.root = Path(root)
        self.log_path = log
        self.step = None

    @contextmanager
    def stage(self, name):
        self.step = name
        started = time.monotonic()
        self._log(f"\n=== {name}\n")
        ui.detail(f"{self.layer.title}: {name}")
        yield
        self._log(f"=== {name}: {time.monotonic() - started:.0f}s\n")

    def _log(self, text):
        with open(self.log_path, "a") as fh:
            fh.write(text)

    def run(self, *argv, env=None, input=None, timeout=3600, cwd=None):
        self._log(f"$ {' '.join(str(a) for a in argv)}\n")
        with open(self.log_path, "a") as fh:
            res = subprocess.run(
                [str(a) for a in argv], stdout=fh, stderr=subprocess.STDOUT, env=env,
                input=input, text=True, timeout=timeout, cwd=cwd,
            )
        if res.returncode != 0:
            self.fail(f"{' '.join(str(a) for a in argv[:4])} exited {res.returncode}")

    def output(self, *argv, env=None, timeout=3600, cwd=None):
        """Like ``run``, and return what the command printed on stdout (stderr to the log)."""
        self._log(f"$ {' '.join(str(a) for a in argv)}\n")
        with open(self.log_path, "a") as fh:
            res = subprocess.run([str(a) for a in argv], stdout=subprocess.PIPE, stderr=fh,
                                 env=env, text=True, timeout=timeout, cwd=cwd)
        self._log(res.stdout)
        if res.returncode != 0:
            self.fail(f"{' '.join(str(a) for a in argv[:4])} exited {res.returncode}")
        return res.stdout

    def chroot(self, *argv, env=None, input=None, timeout=3600):
        base = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C.UTF-8", "HOME": "/root"}
        self.run("chroot", self.root, *argv, env={**base, **(env or {})}, input=input,
                 timeout=timeout)

    def write(self, path, text, mode=0o644):
        target = self.root / str(path).lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        os.chmod(target, mode)

    def fail(self, why):
        tail = []
        try:
            tail = Path(self.log_path).read_text(errors="replace").splitlines()[-12:]
        except OSError:
            pass
        raise BuildFailed(
            f"building {self.layer.title} failed at step '{self.step}': {why}",
            fix=f"read the build log {self.log_path}; fix the cause "
            f"({getattr(self.layer, 'causes', 'apt mirror, disk space')}) "
            "and re-run: the build starts this layer again from scratch",
            details=tail,
        )


class Layer:
    """
    ``steps(build)`` fills a layer; ``parts`` are what it depends on (hashed into its name).
    A layer with a ``parent`` is built in an overlay over the parent's stack.
    """

    def __init__(self, name, title, steps, parts, parent=None):
        self.name = name
        self.title = title
        self.steps = steps
        self.parts = parts
        self.parent = parent

    def key(self):
        parent = self.parent.key() if self.parent else ""
        blob = repr((parent, self.name, self.parts)).encode()
        return hashlib.sha256(blob).hexdigest()[:12]

    def path(self):
        _, suite = apt_source()
        return cache_root() / f"{self.name}-{suite}-{self.key()}"

    def ready(self):
        return (self.path() / MARKER).exists() and (
            self.parent is None or self.parent.ready()
        )

    def stack(self):
        """The layer directories, top first, as overlayfs's lowerdir wants them."""
        below = self.parent.stack() if self.parent else []
        return [self.path()] + below

    def lowerdir(self):
        return ":".join(str(p) for p in self.stack())

    def ensure(self):
        """Build whatever of the stack is missing; return the stack."""
        if self.parent:
            self.parent.ensure()
        path = self.path()
        if (path / MARKER).exists():
            return self.stack()
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_name(f".{path.name}.lock"), "w") as lock:
            # Two kos runs building the same layer: the second waits and uses the first's.
            # Other layers build meanwhile (the hosts' beside the cloud's).
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (path / MARKER).exists():
                self._build(path)
        return self.stack()

    def _build(self, path):
        tmp = path.with_name(path.name + ".building")
        _remove_tree(tmp)
        tmp.mkdir(parents=True)
        log = path.with_name(path.name + ".log")
        log.write_text(f"kos: building {self.title} ({path.name})\n")
        ui.info(f"building {self.title} (once; log: {log})")
        started = time.monotonic()
        if self.parent is None:
            root = tmp / "root"
            root.mkdir()
            build = Build(self, root, log)
            try:
                self.steps(build)
            except BaseException:
                _remove_tree(tmp)
                raise
            _finish(root)
            os.rename(root, path)
            _remove_tree(tmp)
        else:
            upper, work, merged = (tmp / d for d in ("upper", "work", "merged"))
            for d in (upper, work, merged):
                d.mkdir()
            opts = f"lowerdir={self.parent.lowerdir()},upperdir={upper},workdir={work}"
            subprocess.run(["mount", "-t", "overlay", f"kos-build-{self.name}", "-o", opts,
                            str(merged)], check=True, capture_output=True)
            build = Build(self, merged, log)
            try:
                self.steps(build)
                _finish(merged)
            except BaseException:
                _unmount_under(merged)
                _remove_tree(tmp)
                raise
            _unmount_under(merged)
            os.rename(upper, path)
            _remove_tree(tmp)
        (path / MARKER).write_text(f"{self.title}\n")
        ui.ok(f"{self.title} built in {time.monotonic() - started:.0f}s: {path}")


@contextmanager
def mounted_api(root):
    """/proc, /sys, /dev and a fresh /run inside a root, for package scripts and daemons."""
    root = Path(root)
    points = []
    try:
        for src, dst, args in (
            ("proc", "proc", ["-t", "proc"]),
            ("sysfs", "sys", ["-t", "sysfs"]),
            ("/dev", "dev", ["--rbind"]),
            ("tmpfs", "run", ["-t", "tmpfs"]),
        ):
            target = root / dst
            target.mkdir(exist_ok=True)
            subprocess.run(["mount", *args, src, str(target)], check=True, capture_output=True)
            points.append(target)
        yield
    finally:
        for target in reversed(points):
            res = subprocess.run(["umount", "-R", str(target)], capture_output=True)
            if res.returncode != 0:
                subprocess.run(["umount", "-R", "-l", str(target)], capture_output=True)


def debootstrap(build, suite, mirror, include=()):
    args = ["debootstrap", "--variant=minbase"]
    if include:
        args.append(f"--include={','.join(include)}")
    build.run(*args, suite, build.root, mirror)
    (build.root / "etc" / "apt" / "sources.list").unlink(missing_ok=True)
    for path, text in apt_sources().items():
        build.write(path, text)
    # Package scripts must not start daemons in the build root.
    build.write("/usr/sbin/policy-rc.d", "#!/bin/sh\nexit 101\n", 0o755)


def apt_install(build, packages):
    with mounted_api(build.root):
        build.chroot("apt-get", "update", "-q")
        build.chroot("apt-get", "install", "-y", "-q", "--no-install-recommends", *packages)
        build.chroot("apt-get", "clean")


def _finish(root):
    root = Path(root)
    # Per-machine identity is made per machine: host keys, machine id, hostname.
    for key in (root / "etc" / "ssh").glob("ssh_host_*"):
        key.unlink()
    machine_id = root / "etc" / "machine-id"
    if machine_id.exists():
        machine_id.write_text("")
    shutil.rmtree(root / "var" / "cache" / "apt" / "archives", ignore_errors=True)
    (root / "var" / "cache" / "apt" / "archives" / "partial").mkdir(parents=True, exist_ok=True)


def _unmount_under(point):
    point = str(Path(point).resolve())
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mp = line.split()[4].replace("\\040", " ")
        if mp == point or mp.startswith(point + "/"):
            mounts.append(mp)
    for mp in sorted(mounts, key=len, reverse=True):
        if subprocess.run(["umount", mp], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", mp], capture_output=True)


def _remove_tree(path):
    path = Path(path)
    if path.exists():
        _unmount_under(path)
        shutil.rmtree(path, ignore_errors=True)


def edited(text, shipped, fixed):
    """``text`` with ``shipped`` replaced by ``fixed``; None unless ``shipped`` occurs
    exactly once (other code than the edit was made for)."""
    if text.count(shipped) != 1:
        return None
    return text.replace(shipped, fixed)


def edit_python(build, step, edits, release):
    """The ``(path, shipped, fixed)`` edits of Python files in the image ``build`` makes, at
    ``step``, their stale bytecode removed; none of them, and the build stopped, unless each
    finds its text (that of ``release``)."""
    with build.stage(step):
        texts = {}
        for rel, shipped, fixed in edits:
            path = build.root / rel
            texts[path] = edited(path.read_text(), shipped, fixed) if path.exists() else None
            if texts[path] is None:
                build.fail(f"/{rel} is not the {release} kos edits: its text changed")
        for path, text in texts.items():
            path.write_text(text)
            for stale in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
                stale.unlink()


def files_digest(*paths):
    """Digest of files (or every file below directories) a layer copies in."""
    digest = hashlib.sha256()
    for base in paths:
        base = Path(base)
        files = sorted(p for p in base.rglob("*") if p.is_file()) if base.is_dir() else [base]
        for p in files:
            if "__pycache__" in p.parts:
                continue
            digest.update(str(p.relative_to(base.parent)).encode())
            digest.update(p.read_bytes())
    return digest.hexdigest()[:16]
