#!/usr/bin/env python3
"""
Converge benchmark on the local rehearsal cloud (not a test: it prints figures and never
fails on a time).

For each N in --workers (default 5 10 25 50), with one control plane and microk8s:

  converge   kos up: from "every minion connected" (keys accepted, minions answering) to
             "all joined and highstate clean": formula/pillar push, sync, orch.deploy
  second     kos converge again: the same orchestration, which must change nothing
  add one    kos up with one more worker: from its minion connected to joined and clean
  batch-1    the baseline: the same N-node cluster, fresh, converged one minion at a time
             the way the field's Salt deployments do it (mine.update, then
             ``salt -b 1 '*' state.highstate`` repeated until every minion is clean)

Every join (and kubeadm init) takes a fixed simulated duration (--join-seconds), stated
in the output. Peak memory is the machine's (MemTotal - MemAvailable) sampled every
0.5 s over the whole run. Writes a table to stdout and JSON to --json.

Needs root, like the local cloud. Run: .venv/bin/python bench/converge.py --workers 5 10
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bootstrap"))

from kos import workflow  # noqa: E402
from kos.salt import failed_states  # noqa: E402

CLUSTER = "kosbench"
CONVERGE_STEPS = ("salt-trees", "salt-pillar", "salt-sync", "orchestrate")


class MemoryPeak(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.peak = 0
        self.stop = threading.Event()

    @staticmethod
    def used_mib():
        info = {}
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, value = line.split(":", 1)
            info[key] = int(value.split()[0])
        return (info["MemTotal"] - info["MemAvailable"]) // 1024

    def run(self):
        while not self.stop.wait(0.5):
            self.peak = max(self.peak, self.used_mib())


class Bench:
    def __init__(self, work, join_seconds, agent_env):
        self.work = work
        self.env = {**agent_env, "KOS_LOCAL_JOIN_SECONDS": str(join_seconds)}

    def var_file(self, workers, public_key):
        path = self.work / f"bench-{workers}.tfvars.json"
        path.write_text(json.dumps({
            "cluster_name": CLUSTER,
            "kubernetes_distribution": "microk8s",
            "num_control_plane": 1,
            "num_kube_nodes": 1 + workers,
            "public_cidr": "10.236.0.0/24",
            "private_cidr": "10.237.0.0/24",
            "ssh_allowed_cidrs": ["10.236.0.0/24"],
            "ssh_public_keys": [public_key],
            "external_network_name": "local",
            "base_image": "debian-12-local",
        }))
        return path

    def kos(self, *args):
        res = subprocess.run([sys.executable, "-m", "kos", *map(str, args)], cwd=self.work,
                             env=self.env, capture_output=True, text=True)
        if res.returncode != 0:
            raise SystemExit(f"kos {' '.join(map(str, args))} failed (exit {res.returncode}):\n"
                             + res.stderr[-4000:])
        return res

    def steps(self):
        doc = json.loads((self.work / ".kos" / CLUSTER / "steps.json").read_text())
        return {name: rec.get("seconds") or 0.0 for name, rec in doc["steps"].items()}

    def converge_seconds(self):
        steps = self.steps()
        return round(sum(steps.get(s, 0.0) for s in CONVERGE_STEPS), 1)

    def changed_states(self, stderr):
        import re

        return sum(int(n) for n in re.findall(r"highstate ok \(\d+ states, (\d+) changed\)", stderr))

    def baseline(self, var_file):
        """A fresh cluster converged by batch-1 highstates; seconds from minions connected."""
        os.environ.update(self.env)
        settings = workflow.Settings(
            terraform_dir=REPO / "terraform", state_root=self.work / ".kos", var_files=[var_file],
            cloud="local", connect_wait=300,
        )
        dep = workflow.Deployment(settings)
        dep.use_outputs(dep.backend.create(dep.inputs, dep.steps))
        outputs = dep.outputs()
        ids = sorted(outputs["minions"])
        with dep.master() as master:
            master.wait_and_accept(ids, timeout=900)
            master.wait_responding(ids)
            started = time.monotonic()
            workflow.push_trees(master, settings)
            master.push_pillar(outputs["salt_pillar"], settings.pillar_file)
            master.sync_all(ids)
            master.salt(ids, "saltutil.refresh_pillar", "wait=True", timeout=120, wait=900)
            master.salt(ids, "mine.update", timeout=120, wait=900)
            passes, clean = 0, False
            while not clean and passes < 4:
                passes += 1
                res = master.ssh.run(
                    ["salt", "--out=json", "--out-indent=-1", "--static", "-b", "1",
                     "-L", ",".join(ids), "state.highstate"],
                    timeout=7200, check=False,
                )
                returns = {}
                for line in res.stdout.splitlines():
                    if line.startswith("{"):
                        try:
                            returns.update(json.loads(line))
                        except ValueError:
                            pass
                clean = all(m in returns and not failed_states(returns[m]) for m in ids)
            return round(time.monotonic() - started, 1), passes, clean

    def one(self, workers, public_key):
        row = {"workers": workers}
        small, bigger = self.var_file(workers, public_key), self.var_file(workers + 1, public_key)
        self.kos("down", "--cloud", "local", "--var-file", small, "--yes")
        self.kos("up", "--cloud", "local", "--var-file", small, "--yes", "--wait-minions", 1800)
        row["keys_seconds"] = self.steps().get("salt-keys")
        row["converge_seconds"] = self.converge_seconds()
        again = self.kos("converge", "--cloud", "local", "--var-file", small)
        row["second_run_seconds"] = self.steps().get("orchestrate")
        row["second_run_changes"] = self.changed_states(again.stderr)
        self.kos("up", "--cloud", "local", "--var-file", bigger, "--yes", "--wait-minions", 1800)
        row["add_one_seconds"] = self.converge_seconds()
        self.kos("down", "--cloud", "local", "--var-file", bigger, "--yes")
        seconds, passes, clean = self.baseline(small)
        row["batch1_seconds"], row["batch1_passes"], row["batch1_clean"] = seconds, passes, clean
        self.kos("down", "--cloud", "local", "--var-file", small, "--yes")
        return row


def write_json(args, rows, peak):
    result = {
        "simulated_join_seconds": args.join_seconds,
        "control_planes": 1,
        "distribution": "microk8s (simulated)",
        "machine": {"cpus": os.cpu_count(), "peak_memory_used_mib": peak},
        "runs": rows,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(result, indent=2) + "\n")


def agent(work):
    key = work / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    sock = work / "agent.sock"
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    for _ in range(100):
        if sock.exists():
            break
        time.sleep(0.05)
    env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
    subprocess.run(["ssh-add", "-q", str(key)], env=env, check=True)
    return proc, env, (work / "id_ed25519.pub").read_text().strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, nargs="+", default=[5, 10, 25, 50])
    ap.add_argument("--join-seconds", type=float, default=2.0,
                    help="simulated duration of every join and init (default 2)")
    ap.add_argument("--json", default=str(REPO / "bench" / "results" / "converge.json"), help="where to write the figures")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/converge.py needs root (the local cloud does)", file=sys.stderr)
        return 2
    memory = MemoryPeak()
    memory.start()
    rows = []
    with tempfile.TemporaryDirectory(prefix="kos-bench-") as tmp:
        work = Path(tmp)
        proc, env, public_key = agent(work)
        try:
            bench = Bench(work, args.join_seconds, env)
            for n in args.workers:
                print(f"bench: {n} workers ...", file=sys.stderr, flush=True)
                rows.append(bench.one(n, public_key))
                print(f"bench: {n} workers: {rows[-1]}", file=sys.stderr, flush=True)
                # after every size, so a long run that is stopped keeps what it measured
                write_json(args, rows, memory.peak)
        finally:
            proc.terminate()
    memory.stop.set()
    memory.join()
    write_json(args, rows, memory.peak)
    print(f"Converge on the local cloud, 1 control plane, microk8s simulated; every join takes "
          f"{args.join_seconds:g} s (simulated). Seconds from minions connected.")
    head = f"{'workers':>7} {'converge':>9} {'2nd run':>8} {'changes':>7} {'add one':>8} {'batch-1':>8} {'passes':>6}"
    print(head)
    for r in rows:
        print(f"{r['workers']:>7} {r['converge_seconds']:>9} {r['second_run_seconds']:>8} "
              f"{r['second_run_changes']:>7} {r['add_one_seconds']:>8} {r['batch1_seconds']:>8} "
              f"{r['batch1_passes']:>6}{'' if r['batch1_clean'] else ' (not clean)'}")
    total = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    print(f"peak memory used on this machine: {memory.peak} MiB of {total} MiB; "
          f"figures in {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
