"""
The local cloud's VMs: one systemd-nspawn container per host, booting systemd (``-b``)
from an overlay over the cached image, inside the host's network namespace.

``provision`` does what cloud-init does on OpenStack (terraform/cloud-init/*.tftpl):
hostname, the deploy user with its keys and passwordless sudo, ``/etc/hosts`` entries for
the salt master and the bastion, the minion's id and master, and on the salt master the
Terraform pillar. Where cloud-init installs Salt with salt-bootstrap, a local host runs
the project's virtualenv, bound read-only at the same path, from systemd units named as
salt-bootstrap names them (salt-minion, salt-master), so the formula manages them as it
would on a VM.
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from ..errors import CleanupError, ConvergeError

REPO = Path(__file__).resolve().parents[3]
STANDINS = REPO / "tests" / "standins"
SALT_COMMANDS = ("salt", "salt-call", "salt-key", "salt-run", "salt-master", "salt-minion")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def machine_name(cluster, hostname):
    return f"kos-{cluster}-{hostname}"


def bound_paths():
    """The project, its virtualenv and the CPython the virtualenv was made from."""
    paths = []
    for p in (REPO, Path(sys.prefix), Path(os.path.realpath(sys.base_prefix))):
        p = p.resolve()
        if not any(p == q or q in p.parents for q in paths):
            paths = [q for q in paths if p not in q.parents] + [p]
    return paths


class Host:
    def __init__(self, cluster, spec, domain, root):
        self.cluster = cluster
        self.spec = spec
        self.domain = domain
        self.dir = Path(root) / spec.hostname
        self.upper, self.work, self.merged = (self.dir / d for d in ("upper", "work", "merged"))
        self.name = machine_name(cluster, spec.hostname)
        self.console = self.dir / "console.log"

    @property
    def fqdn(self):
        return self.spec.fqdn(self.domain)

    # -- disk ------------------------------------------------------------------------

    def mounted(self):
        return os.path.ismount(self.merged)

    def mount(self, image):
        for d in (self.upper, self.work, self.merged):
            d.mkdir(parents=True, exist_ok=True)
        if not self.mounted():
            opts = f"lowerdir={image},upperdir={self.upper},workdir={self.work}"
            res = subprocess.run(
                ["mount", "-t", "overlay", self.name, "-o", opts, str(self.merged)],
                capture_output=True, text=True,
            )
            if res.returncode != 0:
                raise ConvergeError(f"cannot mount the overlay of {self.name}: {res.stderr.strip()}")

    def path(self, p):
        return self.merged / p.lstrip("/")

    def write(self, p, text, mode=0o644):
        target = self.path(p)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        os.chmod(target, mode)

    def chroot(self, *args):
        res = subprocess.run(["chroot", str(self.merged), *args], capture_output=True, text=True)
        if res.returncode != 0:
            raise ConvergeError(f"{self.name}: {' '.join(args)}: {res.stderr.strip()}")
        return res.stdout

    # -- first boot (cloud-init's part) ----------------------------------------------

    def provision(self, *, user, keys, master_ip, hosts, salt_env, master_files=None):
        if self.path("/var/lib/kos/provisioned").exists():
            return False
        h = self.spec.hostname
        self.write("/etc/hostname", f"{h}\n")
        self.write(
            "/etc/hosts",
            f"127.0.0.1 localhost\n127.0.1.1 {self.fqdn} {h}\n"
            + "".join(f"{ip} {name}.{self.domain} {name}\n" for name, ip in hosts.items()),
        )
        subprocess.run(["ssh-keygen", "-q", "-A", "-f", str(self.merged)], check=True, capture_output=True)
        self.write("/etc/machine-id", os.urandom(16).hex() + "\n", 0o444)
        # The deploy user, as cloud-init creates it: keys only, passwordless sudo.
        if user not in self.chroot("getent", "passwd").split(":"):
            self.chroot("useradd", "--create-home", "--shell", "/bin/bash", user)
        self.write(f"/etc/sudoers.d/90-kos-{user}", f"{user} ALL=(ALL) NOPASSWD:ALL\n", 0o440)
        self.write(f"/home/{user}/.ssh/authorized_keys", "".join(k.strip() + "\n" for k in keys), 0o600)
        self.chroot("chown", "-R", f"{user}:{user}", f"/home/{user}/.ssh")
        os.chmod(self.path(f"/home/{user}/.ssh"), 0o700)
        # Salt: the project's virtualenv, on PATH for sudo (secure_path) and for units.
        venv_bin = Path(sys.prefix) / "bin"
        for cmd in SALT_COMMANDS:
            link = self.path(f"/usr/local/bin/{cmd}")
            link.unlink(missing_ok=True)
            link.symlink_to(venv_bin / cmd)
        self.write("/etc/salt/minion_id", self.fqdn)
        self.write(
            "/etc/salt/minion.d/kos.conf", yaml.safe_dump({"id": self.fqdn, "master": master_ip})
        )
        units = ["salt-minion"]
        if master_files:
            units.insert(0, "salt-master")
            for p, text in master_files.items():
                self.write(p, text, 0o640 if p.startswith("/srv/pillar") else 0o644)
            self.path("/srv/salt").mkdir(parents=True, exist_ok=True)
        env = {
            # The Kubernetes distributions are the test stand-ins: never on a real node.
            "PATH": f"{STANDINS / 'bin'}:/snap/bin:{SYSTEM_PATH}",
            "KOS_STANDIN_ROOT": "/",
            "KOS_STANDIN_IP": self.spec.private_ip,
            **salt_env,
        }
        for unit in units:
            self.write(f"/etc/systemd/system/{unit}.service", _unit(unit, venv_bin, env))
            wants = self.path("/etc/systemd/system/multi-user.target.wants")
            wants.mkdir(parents=True, exist_ok=True)
            (wants / f"{unit}.service").unlink(missing_ok=True)
            (wants / f"{unit}.service").symlink_to(f"/etc/systemd/system/{unit}.service")
        self.write("/var/lib/kos/provisioned", "")
        return True

    # -- power -----------------------------------------------------------------------

    def nspawn_pid(self):
        return nspawns(re.escape(self.name)).get(self.name)

    def pid1(self):
        pid = self.nspawn_pid()
        return _container_init(pid) if pid else None

    def start(self, netns):
        if self.nspawn_pid():
            return False
        cmd = [
            "systemd-nspawn", "--boot", f"--directory={self.merged}", f"--machine={self.name}",
            # No systemd-machined here, and no unit of the machine's own to put it in.
            "--register=no", "--keep-unit",
            f"--network-namespace-path=/run/netns/{netns}", "--private-network",
            "--console=read-only", "--kill-signal=SIGRTMIN+3",
            # No route out, so no name server: without resolv.conf a lookup fails at
            # once (127.0.0.1:53 refuses) instead of timing out in every grains refresh.
            "--resolv-conf=delete",
            *[f"--bind-ro={p}" for p in bound_paths()],
        ]
        with open(self.console, "ab") as log:
            # Not waited for: found again by its --machine name, from any later kos run.
            subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return True

    def run(self, *args, timeout=60, check=True):
        """A command inside the running host (all its namespaces), as root."""
        pid = self.pid1()
        if not pid:
            raise ConvergeError(f"{self.name} is not running")
        res = subprocess.run(
            ["nsenter", "-t", str(pid), "-a", *args], capture_output=True, text=True, timeout=timeout
        )
        if check and res.returncode != 0:
            raise ConvergeError(f"{self.name}: {' '.join(args)}: {(res.stderr or res.stdout).strip()}")
        return res

    def wait_booted(self, timeout=180):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pid1():
                res = self.run("systemctl", "is-system-running", check=False, timeout=30)
                state = res.stdout.strip()
                if state in ("running", "degraded"):
                    return state
            elif not self.nspawn_pid():
                tail = self.console.read_text(errors="replace")[-1500:] if self.console.exists() else ""
                raise ConvergeError(f"{self.name} did not boot", details=tail.splitlines()[-10:])
            time.sleep(0.5)
        raise ConvergeError(f"{self.name} did not finish booting in {timeout}s")


def _unit(name, venv_bin, env):
    lines = [
        "# Written by kos for the local rehearsal cloud: Salt from the project's virtualenv.",
        "[Unit]",
        f"Description=The Salt {'Master' if name == 'salt-master' else 'Minion'} (kos local cloud)",
        "After=network.target",
        "",
        "[Service]",
        *[f"Environment={k}={v}" for k, v in env.items()],
        f"ExecStart={venv_bin / name}",
        "KillMode=process" if name == "salt-minion" else "",
        "Restart=on-failure",
        "LimitNOFILE=100000",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(line for line in lines if line is not None)


def _cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def _container_init(nspawn_pid):
    """The host's PID 1: the one child of its systemd-nspawn."""
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
    Power off: SIGTERM to nspawn (the host's systemd shuts down cleanly); whatever is
    still up after ``timeout`` loses its PID 1 to SIGKILL, which takes the whole host
    with it (killing only nspawn would orphan the host's systemd).
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
        raise CleanupError(f"hosts still running: {', '.join(left)}", fix="kill their systemd-nspawn")


def _running(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def unmount_all(root, source_pattern=None):
    """
    Every mount at or below ``root`` (the hosts' overlays), and every overlay whose source
    matches ``source_pattern`` wherever it is (a state directory moved or deleted by hand),
    deepest first.
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
