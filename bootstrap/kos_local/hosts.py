"""
The rehearsal cloud's machines: systemd-nspawn containers booting systemd (``-b``) from an
overlay over a cached image, each in a network namespace of its own. The cloud itself is
one (``kos-<cluster>-cloud``); every server Nova spawns is another, made by the
materialiser. Machines are found again by their ``--machine`` name, from any later run.
"""

import importlib.metadata
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from kos.errors import CleanupError, ConvergeError

REPO = Path(__file__).resolve().parents[2]


def _extension_sources():
    """Where the salt extensions installed editable in this virtualenv import from (the
    paths of their .pth files): saltext.kos in a checkout, part of Salt's runtime."""
    for dist in importlib.metadata.distributions():
        if not any(ep.group == "salt.loader" for ep in dist.entry_points):
            continue
        for file in dist.files or ():
            if file.name.endswith(".pth"):
                for line in (file.read_text() or "").splitlines():
                    path = Path(line.strip())
                    if path.is_absolute() and path.is_dir():
                        yield path


def bound_paths():
    """What a rehearsal host sees of this machine, read-only: Salt's runtime (this
    virtualenv, the CPython it was made from, the sources of the salt extensions installed
    in it), as a server on OpenStack has its own. Nothing else of the checkout: not its
    state directories (the operator's keys, the other hosts' disks, the cloud's)."""
    paths = []
    for p in (Path(sys.prefix), Path(os.path.realpath(sys.base_prefix)),
              *_extension_sources()):
        p = p.resolve()
        if not any(p == q or q in p.parents for q in paths):
            paths = [q for q in paths if p not in q.parents] + [p]
    return paths


class Machine:
    def __init__(self, name, directory, console=None):
        self.name = name
        self.dir = Path(directory)
        self.upper, self.work, self.merged = (self.dir / d for d in ("upper", "work", "merged"))
        self.console = Path(console) if console else self.dir / "console.log"

    # -- disk ------------------------------------------------------------------------

    def mounted(self):
        return os.path.ismount(self.merged)

    def mount(self, lowerdir, upper_root=None):
        """The root: an overlay of ``lowerdir`` whose writable layer is in the machine's
        directory, or in ``upper_root`` (a server's boot volume, mounted)."""
        upper, work = ((Path(upper_root) / "upper", Path(upper_root) / "work") if upper_root
                       else (self.upper, self.work))
        for d in (upper, work, self.merged):
            d.mkdir(parents=True, exist_ok=True)
        if not self.mounted():
            opts = f"lowerdir={lowerdir},upperdir={upper},workdir={work}"
            res = subprocess.run(
                ["mount", "-t", "overlay", self.name, "-o", opts, str(self.merged)],
                capture_output=True, text=True,
            )
            if res.returncode != 0:
                raise ConvergeError(f"cannot mount the overlay of {self.name}: {res.stderr.strip()}")

    def path(self, p):
        return self.merged / str(p).lstrip("/")

    def write(self, p, text, mode=0o644):
        target = self.path(p)
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            target.write_bytes(text)
        else:
            target.write_text(text)
        os.chmod(target, mode)

    def chroot(self, *args, user=None):
        argv = ["chroot", str(self.merged)]
        if user:
            argv += ["runuser", "-u", user, "--"]
        res = subprocess.run([*argv, *args], capture_output=True, text=True)
        if res.returncode != 0:
            raise ConvergeError(f"{self.name}: {' '.join(args)}: {res.stderr.strip()}")
        return res.stdout

    # -- power -----------------------------------------------------------------------

    def nspawn_pid(self):
        return nspawns(re.escape(self.name)).get(self.name)

    def running_from(self):
        """The directory the running machine of this name boots from (None: not running)."""
        pid = self.nspawn_pid()
        for arg in _cmdline(pid) if pid else []:
            if arg.startswith(b"--directory="):
                return Path(arg.split(b"=", 1)[1].decode())
        return None

    def pid1(self):
        pid = self.nspawn_pid()
        return _container_init(pid) if pid else None

    def start(self, netns, binds=(), extra=(), kubelet=False):
        """Boot the machine unless it runs; True when it was started now. ``kubelet``: a
        host that can run a real kubelet and containers (``KUBELET_OPTIONS``)."""
        if self.nspawn_pid():
            return False
        preexec = None
        if kubelet:
            cgroups = self.cgroups(create=True)
            # containerd's overlay snapshots cannot live on the host's own overlay root
            store = self.dir / "containerd"
            store.mkdir(parents=True, exist_ok=True)
            extra = [*extra, *KUBELET_OPTIONS, f"--bind={store}:/var/lib/containerd"]
            # what the image's kos-kubelet-host.service does at boot (kos_local.rootfs)
            self.write(KUBELET_FLAG, "kos: this host runs a kubelet\n")
            for key, value in KUBELET_SYSCTLS.items():
                self.write(f"{SYSCTL_SHADOWS}/{key}", f"{value}\n")
            preexec = _join_cgroups(cgroups)
        cmd = [
            "systemd-nspawn", "--boot", f"--directory={self.merged}", f"--machine={self.name}",
            # No systemd-machined here, and no unit of the machine's own to put it in.
            "--register=no", "--keep-unit",
            # Private: the machine gets CAP_NET_ADMIN in its own namespace (and nowhere else).
            f"--network-namespace-path=/run/netns/{netns}", "--private-network",
            "--console=read-only", "--kill-signal=SIGRTMIN+3",
            *[f"--bind-ro={p}" for p in binds],
            *extra,
        ]
        self.console.parent.mkdir(parents=True, exist_ok=True)
        with open(self.console, "ab") as log:
            # Not waited for: found again by its --machine name, from any later kos run.
            subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=preexec,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not self.pid1():
            time.sleep(0.1)
        return True

    # -- a host for a real kubelet ------------------------------------------------------

    def cgroups(self, create=False):
        """The machine's own cgroup in every hierarchy, below this process's own (so the
        machine stays inside whatever limits this machine's processes are under)."""
        dirs = [Path(mount) / own.lstrip("/") / CGROUP_PARENT / self.name
                for mount, own in own_cgroups()]
        if create:
            for d in dirs:
                for level in (d.parent, d):
                    level.mkdir(exist_ok=True)
                    # A new cpuset takes no task until it has CPUs and memory nodes. The
                    # materialiser boots servers side by side: a parent another boot has
                    # just made may not have them yet, so each fills what is empty.
                    for f in ("cpuset.cpus", "cpuset.mems"):
                        if (level / f).exists() and not (level / f).read_text().strip():
                            (level / f).write_text((level.parent / f).read_text())
        return dirs

    def remove_cgroups(self):
        """The machine's cgroups and what its systemd and kubelet made in them."""
        return remove_cgroups(d for d in self.cgroups() if d.is_dir())

    def run(self, *args, timeout=60, check=True, input=None):
        """A command inside the running machine (all its namespaces), as root."""
        pid = self.pid1()
        if not pid:
            raise ConvergeError(f"{self.name} is not running")
        res = subprocess.run(
            ["nsenter", "-t", str(pid), "-a", *args], capture_output=True, text=True,
            timeout=timeout, input=input,
        )
        if check and res.returncode != 0:
            raise ConvergeError(f"{self.name}: {' '.join(args)}: {(res.stderr or res.stdout).strip()}")
        return res

    def console_tail(self, lines=12):
        try:
            return self.console.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return []

    def stop(self, timeout=30):
        pid = self.nspawn_pid()
        if pid:
            stop({self.name: pid}, timeout=timeout)
        self.remove_cgroups()

    def unmount(self):
        unmount_all(self.dir)


CGROUP_PARENT = "kos-hosts"
# What a kubelet and containerd need of a container beyond nspawn's defaults: kernel
# messages (the kubelet's OOM watcher) and the keyring calls runc makes.
KUBELET_OPTIONS = (
    "--capability=CAP_SYSLOG", "--system-call-filter=@keyring", "--bind-ro=/dev/kmsg",
)
# Inside a kubelet host, at boot, before containerd and the kubelet (the host image's
# kos-kubelet-host.service): the cgroup controllers nspawn mounts read-only made writable
# (the host's systemd and kubelet create the kubelet's slices in them), mounts shared as on
# a booted machine (the kubelet's volume mounts), and the kernel settings a kubelet writes
# for the whole machine shadowed by files that already hold what it wants (it reads them
# and writes nothing).
KUBELET_FLAG = "/etc/kos-rehearsal/kubelet-host"
KUBELET_SYSCTLS = {"vm.overcommit_memory": 1, "kernel.panic": 10, "kernel.panic_on_oops": 1}
SYSCTL_SHADOWS = "/etc/kos-rehearsal/sysctl"


def own_cgroups():
    """``[(mount point, this process's cgroup there)]`` for every mounted hierarchy."""
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            own[c] = path
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        fstype, options = fields[sep + 1], fields[sep + 3].split(",")
        if fstype == "cgroup2" and "" in own:
            found.append((fields[4], own[""]))
        elif fstype == "cgroup":
            names = [o for o in options if o in own and o]
            if names:
                found.append((fields[4], own[names[0]]))
    return found


def machine_cgroups(pattern):
    """The cgroups (every hierarchy) of the kubelet hosts whose machine name matches,
    running or not."""
    found = []
    for mount, own in own_cgroups():
        parent = Path(mount) / own.lstrip("/") / CGROUP_PARENT
        if parent.is_dir():
            found += [d for d in sorted(parent.iterdir())
                      if d.is_dir() and re.fullmatch(pattern, d.name)]
    return found


def remove_cgroups(dirs, timeout=15):
    """Remove each cgroup with what was made below it, deepest first; the ones left.
    A cgroup refuses removal (EBUSY) while its last processes are still exiting, which
    lasts a moment after the machine's nspawn is gone: retried until ``timeout``."""
    dirs = list(dirs)
    deadline = time.monotonic() + timeout
    while True:
        left = []
        for d in dirs:
            tree = [p for p in d.rglob("*") if p.is_dir()] if d.is_dir() else []
            for sub in sorted(tree, key=lambda p: len(p.parts), reverse=True):
                _rmdir(sub)
            _rmdir(d)
            if d.is_dir():
                left.append(d)
        if not left or time.monotonic() >= deadline:
            return left
        dirs = left
        time.sleep(0.2)


def _join_cgroups(dirs):
    paths = [str(d / "cgroup.procs") for d in dirs]

    def join():
        pid = str(os.getpid()).encode()
        for path in paths:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)
    return join


def _rmdir(path):
    try:
        path.rmdir()
    except OSError:
        pass


def _cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def _container_init(nspawn_pid):
    """The machine's PID 1: the one child of its systemd-nspawn."""
    try:
        children = Path(f"/proc/{nspawn_pid}/task/{nspawn_pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def nspawns(pattern):
    """``{machine name: nspawn pid}`` for every running machine whose name matches."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        argv = _cmdline(entry.name)
        if not argv or not argv[0].endswith(b"systemd-nspawn"):
            continue
        for arg in argv:
            m = re.fullmatch(rb"--machine=(.+)", arg)
            if m and re.fullmatch(pattern, m.group(1).decode()):
                found[m.group(1).decode()] = int(entry.name)
    return found


def stop(machines, timeout=30):
    """
    Power off: SIGTERM to nspawn (the machine's systemd shuts down cleanly); whatever is
    still up after ``timeout`` loses its PID 1 to SIGKILL, which takes the whole machine
    with it (killing only nspawn would orphan the machine's systemd).
    """
    pid1s = {}
    for name, pid in machines.items():
        pid1s[name] = _container_init(pid)
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_running(p) for p in machines.values()):
        time.sleep(0.2)
    for name, pid in machines.items():
        if _running(pid):
            for victim in (pid1s.get(name), pid):
                if victim:
                    try:
                        os.kill(victim, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(_running(p) for p in machines.values()):
        time.sleep(0.2)
    left = [name for name, pid in machines.items() if _running(pid)]
    if left:
        raise CleanupError(f"machines still running: {', '.join(left)}", fix="kill their systemd-nspawn")


def _running(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def unmount_all(root, source_pattern=None):
    """
    Every mount at or below ``root`` (the machines' overlays), and every overlay whose
    source matches ``source_pattern`` wherever it is (a state directory moved or deleted by
    hand), deepest first.
    """
    root = str(Path(root).resolve())
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        point = fields[4].replace("\\040", " ")
        fstype, source = (fields[fields.index("-") + 1 : fields.index("-") + 3] + ["", ""])[:2]
        if point == root or point.startswith(root + "/"):
            mounts.append(point)
        elif source_pattern and fstype == "overlay" and re.fullmatch(source_pattern, source):
            mounts.append(point)
    for point in sorted(set(mounts), key=len, reverse=True):
        res = subprocess.run(["umount", point], capture_output=True, text=True)
        if res.returncode != 0:
            subprocess.run(["umount", "-l", point], capture_output=True)
    return mounts


def remove_disks(root):
    shutil.rmtree(root, ignore_errors=True)
