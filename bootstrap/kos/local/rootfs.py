"""
The local cloud's base image: a minimal Debian root filesystem made once with debootstrap
from the mirror apt already uses on this machine, cached under ``~/.cache/kos/rootfs`` and
shared read-only (as the lower layer of an overlay) by every host of every local cluster.

Hosts have no route to the internet, so everything the states install is baked in here;
``pkg.installed`` then finds it and changes nothing. Salt itself is not: the hosts run the
project's virtualenv, bound read-only.
"""

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from .. import ui
from ..errors import PreflightError

# Bump when the recipe below changes: a new recipe means a new cached image.
RECIPE = 2
PACKAGES = (
    # a booting systemd host
    "systemd", "systemd-sysv", "dbus", "procps", "kmod", "iproute2", "iputils-ping",
    "netcat-openbsd", "sudo", "less", "openssl", "ca-certificates",
    # core: sshd, packages
    "openssh-server", "openssh-client", "curl", "jq", "rsync",
    # bastion
    "iptables", "iptables-persistent", "fail2ban", "python3-systemd",
    # kubeadm: the local load balancer
    "haproxy",
    # what the project's CPython (built elsewhere, bound in) links against
    "libssl3", "libffi8", "zlib1g", "libsqlite3-0", "libbz2-1.0", "liblzma5", "libreadline8",
    "libncursesw6", "libgdbm6", "libuuid1",
)
# Installed enabled by Debian, owned by the formula (or pointless in a rehearsal host).
DISABLED_UNITS = (
    "haproxy.service", "fail2ban.service", "apt-daily.timer", "apt-daily-upgrade.timer",
    "dpkg-db-backup.timer", "e2scrub_all.timer", "e2scrub_reap.service", "fstrim.timer",
)
MARKER = ".kos-rootfs"


def cache_root():
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kos" / "rootfs"


def apt_source():
    """``(mirror, suite)`` of the machine's own apt configuration (deb822 or one-line)."""
    mirror = os.environ.get("KOS_LOCAL_MIRROR")
    suite = os.environ.get("KOS_LOCAL_SUITE")
    if mirror and suite:
        return mirror, suite
    texts = []
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        if path.suffix in (".list", ".sources") and path.is_file():
            texts.append(path.read_text())
    for text in texts:
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


def image_path():
    mirror, suite = apt_source()
    key = hashlib.sha256(f"{RECIPE}|{mirror}|{suite}|{' '.join(PACKAGES)}".encode()).hexdigest()
    return cache_root() / f"debian-{suite}-{key[:12]}", mirror, suite


def ensure():
    """The cached image's path; debootstrap it first when it is not there yet."""
    path, mirror, suite = image_path()
    if (path / MARKER).exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / ".lock", "w") as lock:
        # Two kos runs building the same image: the second waits and uses the first's.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (path / MARKER).exists():
            return path
        tmp = path.with_name(path.name + ".building")
        shutil.rmtree(tmp, ignore_errors=True)
        ui.info(f"building the local cloud's Debian {suite} image from {mirror} (once)")
        res = subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}",
             suite, str(tmp), mirror],
            capture_output=True, text=True,
        )
        if res.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise PreflightError(
                f"debootstrap {suite} from {mirror} failed (exit {res.returncode})",
                fix="check that apt works on this machine (apt-get update), or point "
                "KOS_LOCAL_MIRROR/KOS_LOCAL_SUITE at a reachable mirror",
                details=(res.stderr or res.stdout).strip().splitlines()[-10:],
            )
        _finish(tmp)
        (tmp / MARKER).write_text(f"recipe {RECIPE}\nmirror {mirror}\nsuite {suite}\n")
        os.rename(tmp, path)
    return path


def _finish(root):
    subprocess.run(
        ["systemctl", f"--root={root}", "disable", *DISABLED_UNITS],
        capture_output=True, check=False,
    )
    # Per-host identity is made per host: host keys, machine id, hostname.
    for key in (root / "etc" / "ssh").glob("ssh_host_*"):
        key.unlink()
    (root / "etc" / "machine-id").write_text("")
    (root / "etc" / "hostname").unlink(missing_ok=True)
    shutil.rmtree(root / "var" / "cache" / "apt" / "archives", ignore_errors=True)
    (root / "var" / "cache" / "apt" / "archives" / "partial").mkdir(parents=True, exist_ok=True)
