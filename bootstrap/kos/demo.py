"""
``make demo``: a cluster on the local rehearsal cloud, the way an operator tries a change.

``kos up --cloud local`` with examples/local.tfvars (1 control plane + 2 workers,
microk8s): a real OpenStack on this machine, the repository's Terraform applied to it,
every server a systemd-nspawn host booted by cloud-init, converged through the bastion's
floating IP by the real Salt formula. Kubernetes itself is simulated by the test stand-ins. The demo then prints the cluster, the time each phase took and how
to tear it down (``make demo-down``).

The operator's key for this rehearsal is a throwaway one in .kos/demo-operator/, held by
an ssh-agent that stays up with the cluster (kos reads keys only from an agent).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VARS = REPO / "examples" / "local.tfvars"
OPERATOR = Path(".kos") / "demo-operator"
CLUSTER = "demo"


def _agent():
    """The demo's ssh-agent socket, started (with the demo key) when not running."""
    OPERATOR.mkdir(parents=True, exist_ok=True, mode=0o700)
    key, sock, pidfile = OPERATOR / "id_ed25519", OPERATOR / "agent.sock", OPERATOR / "agent.pid"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kos-demo@local",
                        "-f", str(key)], check=True)
    env = dict(os.environ, SSH_AUTH_SOCK=str(sock.resolve()))
    if subprocess.run(["ssh-add", "-l"], env=env, capture_output=True).returncode == 2:
        sock.unlink(missing_ok=True)
        out = subprocess.run(["ssh-agent", "-a", str(sock.resolve())], capture_output=True,
                             text=True, check=True).stdout
        pidfile.write_text(out.split("SSH_AGENT_PID=")[1].split(";")[0] + "\n")
        subprocess.run(["ssh-add", "-q", str(key)], env=env, check=True)
    keys = OPERATOR / "keys.tfvars.json"
    keys.write_text(json.dumps({"ssh_public_keys": [(OPERATOR / "id_ed25519.pub").read_text().strip()]}))
    return env, keys


def _kos(env, *args, capture=False):
    cmd = [sys.executable, "-m", "kos", *args]
    if capture:
        return subprocess.run(cmd, env=env, capture_output=True, text=True)
    return subprocess.run(cmd, env=env)


def _phases(steps_file=None, since=None):
    """The steps of the last run (those started at ``since``, a time.time(), or after), in
    the order they ran, with their seconds: a step of an earlier kos down is not this run's."""
    doc = json.loads((steps_file or Path(".kos") / CLUSTER / "steps.json").read_text())
    if since is not None:
        after = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(int(since)))
        doc["steps"] = {n: r for n, r in doc["steps"].items() if r.get("started", "") >= after}
    # steps.json is written with sorted keys and its times have one-second resolution, so
    # two steps that start in the same second (terraform-init, then terraform-apply) tie on
    # "started"; the one that ran first also finished first.
    done = [(rec.get("started", ""), rec.get("finished", ""), name, rec.get("seconds"))
            for name, rec in doc["steps"].items() if rec.get("status") == "done"]
    return [(name, seconds) for _, _, name, seconds in sorted(done, key=lambda d: d[:2])]


def _installed(since, steps_file=None):
    """What this run put on the machine, in order: make's lines (.kos/installed.log, from
    ``since`` on), what kos built once for the machine, and the rehearsal cloud."""
    found = []
    log = Path(".kos") / "installed.log"
    for line in log.read_text().splitlines() if log.exists() and since else []:
        stamp, _, what = line.partition(" ")
        if stamp.isdigit() and int(stamp) >= since:
            found.append(what)
    doc = json.loads((steps_file or Path(".kos") / CLUSTER / "steps.json").read_text())
    built = ((doc["steps"].get("local-images") or {}).get("detail") or {}).get("built") or []
    found += [f"{what}, cached under ~/.cache/kos" for what in built]
    cloud = (doc["steps"].get("local-cloud") or {}).get("detail") or {}
    if cloud.get("booted"):
        found.append(f"the rehearsal cloud (API {cloud.get('api')}), under /var/lib/kos; "
                     "it stays while a local cluster is on it")
    return found


def _kos_command():
    """The venv's `kos` script ([project.scripts] in pyproject.toml), as the operator types it."""
    script = Path(sys.executable).with_name("kos")
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def _hints(env, keys):
    """How to try the cluster from a shell: one variable carries the demo's key, so every
    command needs only the example's variables."""
    public_keys = json.loads(keys.read_text())["ssh_public_keys"]
    try:
        var_file = VARS.relative_to(Path.cwd())
    except ValueError:
        var_file = VARS
    where = f"--cloud local --var-file {var_file}"
    ssh_config = Path(".kos") / CLUSTER / "ssh_config"
    return [
        "Try it (export these two in your shell first):",
        f"  export SSH_AUTH_SOCK={env['SSH_AUTH_SOCK']}",
        f"  export TF_VAR_ssh_public_keys='{json.dumps(public_keys)}'",
        f"  {_kos_command()} status {where}",
        f"  {_kos_command()} converge {where}     # after a pillar change",
        f"  {_kos_command()} kubeconfig {where}   # the API through the load balancer",
        f"  ssh -F {ssh_config} salt        # the salt master (sudo salt '*' test.ping)",
        f"  ssh -F {ssh_config} k8s-cp-1    # any node by its host name, host keys pinned",
        f"  OS_CLOUD=kos-local-{CLUSTER} openstack server list   # the rehearsal cloud's API",
        "Tear it down (the servers, the cloud, namespaces, mounts, the demo's agent):",
        "  make demo-down",
    ]


def up():
    env, keys = _agent()
    args = ["--cloud", "local", "--var-file", str(VARS), "--var-file", str(keys)]
    print("kos demo: kos up --cloud local (1 control plane + 2 workers, microk8s, simulated; "
          "the API behind Octavia)", file=sys.stderr)
    started, started_at = time.monotonic(), time.time()
    # progress on the terminal; the data kos prints is not needed for the summary
    res = subprocess.run([sys.executable, "-m", "kos", "up", *args, "--yes"], env=env,
                         stdout=subprocess.DEVNULL, text=True)
    total = time.monotonic() - started
    if res.returncode != 0:
        print(f"kos demo: kos up failed (exit {res.returncode}); see above. Tear down with "
              "`make demo-down`.", file=sys.stderr)
        return res.returncode
    status = _kos(env, "status", *args)
    since = int(os.environ.get("KOS_MAKE_STARTED") or 0)
    print()
    print("Installed on this machine by this run, in order:")
    for what in _installed(since) or ["nothing: everything was there already"]:
        print(f"  {what}")
    print()
    print("Time per phase, in the order they ran:")
    make_s = max(0, started_at - since) if since else 0
    if since:
        # make's own part: the virtualenv and the Debian packages, when they were missing
        print(f"  {'make':<22} {make_s:>7.0f}s")
    for name, seconds in _phases(since=started_at):
        print(f"  {name:<22} {seconds if seconds is not None else '-':>7}s")
    print(f"  {'total':<22} {make_s + total:>7.1f}s")
    print()
    print("\n".join(_hints(env, keys)))
    return status.returncode


def down():
    env, keys = _agent()
    args = ["--cloud", "local", "--var-file", str(VARS), "--var-file", str(keys)]
    res = _kos(env, "down", *args, "--yes")
    pidfile = OPERATOR / "agent.pid"
    if pidfile.exists():
        try:
            os.kill(int(pidfile.read_text()), signal.SIGTERM)
        except (ProcessLookupError, ValueError):
            pass
        pidfile.unlink()
    (OPERATOR / "agent.sock").unlink(missing_ok=True)
    return res.returncode


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if os.geteuid() != 0:
        print("kos demo: needs root (namespaces, mounts, systemd-nspawn)", file=sys.stderr)
        return 2
    return down() if argv[:1] == ["down"] else up()


if __name__ == "__main__":
    sys.exit(main())
