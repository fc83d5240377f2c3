#!/usr/bin/env python3
"""
Converge benchmark on the local rehearsal cloud (not a test: it prints figures and never
fails on a time).

For each simulated join time (--join-seconds) and each N in --workers (default 5 25 50),
with one control plane and microk8s:

  fresh      kos up: from "every minion booted and its key presented" (none accepted) to
             "all joined and highstate clean": the master's own minion, formula/pillar
             push, the master's own configuration, the other keys and their minions
             connecting, orch.deploy (wall-clock)
  no-op      kos converge again, nothing changed
  pillar     kos converge after a change every node's pillar sees (core:motd in a copy of
             the repository's pillar), and right after it a direct
             ``salt '*' state.highstate`` on the same cluster (the ratio is the target)
  add one    kos up with one more worker: from its minion connected to joined and clean
  batch-1    the baseline: the same N-node cluster, fresh, from the same start (the
             master configured before the other keys are accepted, as kos does),
             converged one minion at a time
             the way the field's Salt deployments do it (mine.update, the first control
             plane's highstate and the join credentials it issues for every other node,
             then ``salt -b 1 '*' state.highstate`` repeated until every minion is clean;
             a baseline that never comes clean gives no ratio)

For every step: its seconds, how many highstates it ran (from the master's job cache:
state.highstate jobs since the step began, one per minion they targeted), and the
CPU-seconds the hosts spent (each host's processes, read from /proc in its PID namespace:
utime+stime+cutime+cstime of the processes alive, so what ended was counted by whoever
reaped it): on the master, per node on average, and in total. Peak memory is the
machine's (MemTotal - MemAvailable), sampled every 0.5 s.

A size that fails is recorded with its error, its cluster torn down by name (kos down),
and the next size runs. JSON goes to bench/results/ after every size; the table (also as
Markdown, for docs/benchmarks.md) at the end.

Needs root, like the local cloud. Run: .venv/bin/python bench/converge.py --workers 5 25
(--steps add_one: only the fresh converge and the addition)
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bootstrap"))

from kos.steps import converge as converging  # noqa: E402
from kos.steps import deployment  # noqa: E402
from kos.steps import master as on_master  # noqa: E402
from kos.salt import failed_states  # noqa: E402
from kos_local.hosts import _container_init, nspawns  # noqa: E402

CLUSTER = "kosbench"
# A converge of a cluster that is up, or one that adds a node: from "every minion
# connected" (a new node's key is accepted before the clock starts), so the steps converge
# runs (kos.steps.converge.ConvergeStep) less the key acceptances. The fresh converge is timed
# whole, from every key presented.
_KEYS = (converging.ConvergeStep.KEYS, converging.ConvergeStep.MASTER_KEY)
CONVERGE_STEPS = tuple(s.value for s in converging.ConvergeStep if s not in _KEYS)
CLK_TCK = os.sysconf("SC_CLK_TCK")
STEPS = ("fresh", "noop", "pillar", "direct", "add_one", "batch1")


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


# -- CPU accounting ---------------------------------------------------------------------------


def _proc_times(pid):
    """utime+stime+cutime+cstime of a process, in clock ticks (None once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return sum(int(v) for v in fields[11:15])


def _pid_ns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def _comm(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def host_cpu(cluster):
    """``{machine: {"seconds", "master"}}``: CPU every host of ``cluster`` spent so far (the
    cloud's own machine left out), and whether it runs the salt master."""
    namespaces = {}
    for machine, nspawn in nspawns(rf"kos-{cluster}-.+").items():
        if machine.endswith("-cloud"):
            continue
        pid1 = _container_init(nspawn)
        ns = _pid_ns(pid1) if pid1 else None
        if ns:
            namespaces[ns] = machine
    found = {m: {"seconds": 0.0, "master": False} for m in namespaces.values()}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        machine = namespaces.get(_pid_ns(entry.name))
        if machine is None:
            continue
        ticks = _proc_times(entry.name)
        if ticks is not None:
            found[machine]["seconds"] += ticks / CLK_TCK
        if b"salt-master" in _comm(entry.name):
            found[machine]["master"] = True
    return found


def cpu_delta(before, after):
    """CPU-seconds between two ``host_cpu`` readings: master, mean per node, total."""
    spent = {m: after[m]["seconds"] - before.get(m, {"seconds": 0.0})["seconds"] for m in after}
    masters = [m for m in after if after[m]["master"]]
    nodes = [m for m in after if m not in masters]
    return {
        "master": round(sum(spent[m] for m in masters), 1),
        "per_node": round(sum(spent[m] for m in nodes) / len(nodes), 2) if nodes else None,
        "total": round(sum(spent.values()), 1),
        "hosts": len(after),
    }


# -- the runs ---------------------------------------------------------------------------------


class Bench:
    def __init__(self, work, join_seconds, agent_env, baseline_max=1000, keep_failed=False,
                 steps=STEPS):
        self.work = work
        self.measure = steps
        self.keep_failed = keep_failed
        # clouds.yaml goes to the work directory, not to this user's own
        self.env = {**agent_env, "KOS_LOCAL_JOIN_SECONDS": str(join_seconds),
                    "XDG_CONFIG_HOME": str(work)}
        self.baseline_max = baseline_max
        self.pillar_copy = work / "pillar"
        # called after every measured step: a long run that is stopped keeps what it measured
        self.save = lambda: None

    def var_file(self, workers, public_key):
        path = self.work / f"bench-{workers}.tfvars.json"
        path.write_text(json.dumps({
            "cluster_name": CLUSTER,
            "kubernetes_distribution": "microk8s",
            "num_control_plane": 1,
            "num_kube_nodes": 1 + workers,
            "public_cidr": "10.236.0.0/24",
            "private_cidr": "10.237.0.0/24",
            # what the rehearsal cloud offers (examples/local.tfvars)
            "ssh_allowed_cidrs": ["100.64.0.0/10"],
            "ssh_public_keys": [public_key],
            "external_network_name": "public",
            "base_image": "debian-12-rehearsal",
        }))
        return path

    def kos(self, *args, check=True):
        res = subprocess.run([sys.executable, "-m", "kos", *map(str, args)], cwd=self.work,
                             env={**os.environ, **self.env}, capture_output=True, text=True)
        if check and res.returncode != 0:
            raise RuntimeError(f"kos {' '.join(map(str, args))} failed (exit {res.returncode}):"
                               f"\n{res.stderr[-4000:]}")
        return res

    def records(self):
        return json.loads((self.work / ".kos" / CLUSTER / "steps.json").read_text())["steps"]

    def steps(self):
        return {name: rec.get("seconds") or 0.0 for name, rec in self.records().items()}

    def converge_seconds(self):
        steps = self.steps()
        return round(sum(steps.get(s, 0.0) for s in CONVERGE_STEPS), 1)

    def breakdown(self):
        """Where a converge's time went: kos's steps, and the orchestration's steps."""
        recs = self.records()
        return {
            "steps": {s: recs[s].get("seconds") for s in CONVERGE_STEPS if s in recs},
            "orchestration": (recs.get("orchestrate", {}).get("detail") or {}).get("seconds"),
        }

    def deployment(self, var_file, pillar_dir=None):
        os.environ.update(self.env)
        settings = deployment.Settings(
            terraform_dir=REPO / "terraform", state_root=self.work / ".kos",
            var_files=[var_file], cloud="local", connect_wait=300,
        )
        if pillar_dir:
            settings.pillar_dir = pillar_dir
        return deployment.Deployment(settings)

    def highstates(self, var_file, since):
        """state.highstate runs since ``since`` (a datetime), one per minion targeted."""
        with self.deployment(var_file).master() as master:
            res = master.ssh.run(
                ["salt-run", "--out=json", "jobs.list_jobs", "search_function=state.highstate",
                 f"start_time={since.strftime('%Y-%m-%d %H:%M:%S')}"],
                timeout=600, check=False)
            try:
                jobs = json.loads(res.stdout or "{}")
            except ValueError:
                return None
            # jobs.list_jobs leaves out whom a job targeted (local_cache's get_jids reads
            # only the load); jobs.list_job has it
            count = 0
            for jid in jobs:
                one = master.ssh.run(["salt-run", "--out=json", "jobs.list_job", jid],
                                     timeout=600, check=False)
                try:
                    count += len(json.loads(one.stdout or "{}").get("Minions") or [])
                except (ValueError, AttributeError):
                    return None
        return count

    def measured(self, row, name, var_file, action):
        """Run ``action`` (returns seconds, or a dict with "seconds"), noting its highstates
        and the CPU the hosts spent."""
        since = datetime.datetime.now()
        cpu_before = host_cpu(CLUSTER)
        started = time.monotonic()
        result = action()
        wall = round(time.monotonic() - started, 1)
        entry = result if isinstance(result, dict) else {"seconds": result}
        entry.setdefault("seconds", wall)
        entry["cpu"] = cpu_delta(cpu_before, host_cpu(CLUSTER))
        entry["highstates"] = self.highstates(var_file, since)
        row[name] = entry
        print(f"bench:   {name}: {entry}", file=sys.stderr, flush=True)
        self.save()
        return entry

    def changed_pillar(self, workers):
        """A copy of the repository's pillar with a change every node sees."""
        shutil.rmtree(self.pillar_copy, ignore_errors=True)
        shutil.copytree(REPO / "pillar", self.pillar_copy)
        defaults = self.pillar_copy / "environments" / "defaults.sls"
        defaults.write_text(defaults.read_text().replace(
            "core:\n", f"core:\n  motd: \"kos bench: {workers} workers\\n\"\n", 1))
        return self.pillar_copy

    def converge_with(self, var_file, pillar_dir):
        dep = self.deployment(var_file, pillar_dir)
        converging.converge(dep)
        return {"seconds": self.converge_seconds(),
                "orchestrate_seconds": self.steps().get("orchestrate"),
                "where": self.breakdown()}

    def direct_highstate(self, var_file):
        dep = self.deployment(var_file)
        ids = sorted(dep.outputs()["minions"])
        with dep.master() as master:
            started = time.monotonic()
            res = master.ssh.run(["salt", "--out=json", "--static", "--timeout=600", "-L",
                                  ",".join(ids), "state.highstate"], timeout=7200, check=False)
            seconds = round(time.monotonic() - started, 1)
        try:
            returns = json.loads(res.stdout)
        except ValueError:
            returns = {}
        clean = all(m in returns and not failed_states(returns[m]) for m in ids)
        return {"seconds": seconds, "clean": clean}

    def baseline(self, var_file):
        """A fresh cluster converged by batch-1 highstates; seconds from every key presented
        (the machines are created first: call it through ``measured`` after ``create``)."""
        dep = self.deployment(var_file)
        outputs = dep.outputs()
        ids = sorted(outputs["minions"])
        settings = dep.settings
        with dep.master() as master:

            def run():
                pillar = deployment.pillar_of(outputs)
                own = deployment.salt_master_id(pillar)
                self.accept(dep, master, [own])
                on_master.push_trees(master, settings)
                on_master.push_pillar_layers(master, dep, outputs)
                on_master.configure_master(master, pillar, [own])
                self.accept(dep, master, ids)
                master.salt(ids, "state.sls", "kos.extension", timeout=120, wait=900)
                master.salt(ids, "saltutil.refresh_pillar", "wait=True", timeout=120, wait=900)
                master.salt(ids, "mine.update", timeout=120, wait=900)
                # A plain highstate issues no join credential (orch.deploy issues one per
                # node): the first control plane first, then the credentials for every
                # other node at once, long-lived enough for the one-at-a-time pass; without
                # them no node joins (at 25 workers: four passes, never clean).
                kos = pillar.get("kos", {})
                first = kos.get("first_control_plane")
                others = sorted(n for n in kos.get("nodes", {}) if n != first)
                dist = kos["distribution"]  # Terraform's kubernetes_distribution
                run_pillar = {"kos_orchestration": {"join_nodes": others},
                              dist: {"token": {"ttl": 14400}}}
                for cmd in (["state.highstate"],
                            ["state.sls", f"{dist}.credentials",
                             f"pillar={json.dumps(run_pillar)}"]):
                    master.ssh.run(["salt", "--out=json", "--static", first, *cmd],
                                   timeout=7200, check=False)
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
                return {"passes": passes, "clean": clean}

            started = time.monotonic()
            result = run()
            result["seconds"] = round(time.monotonic() - started, 1)
            return result

    def down(self, var_file):
        """Tear the cluster down by name; never raises (the next size must run)."""
        res = self.kos("down", "--cloud", "local", "--var-file", var_file, "--yes", check=False)
        left = nspawns(rf"kos-{CLUSTER}-.+")
        if res.returncode != 0 or left:
            return f"kos down exit {res.returncode}; machines left: {sorted(left)}; " \
                   f"{res.stderr[-1000:]}"
        return None

    def create(self, var_file):
        """The cluster's machines, booted, every minion's key presented and none accepted:
        where the fresh converge and the baseline start."""
        dep = self.deployment(var_file)
        dep.use_outputs(dep.backend.create(dep.inputs, dep.steps))
        ids = sorted(dep.outputs()["minions"])
        with dep.master() as master:
            keys = master.channel.request("wait_keys", minions=ids, timeout=1800,
                                          what="waiting for the minions' keys")
            if keys.get("missing"):
                raise RuntimeError(f"minions never presented a key: {keys['missing']}")

    @staticmethod
    def accept(dep, master, ids):
        """Accept ``ids`` the way kos up does and wait until they answer."""
        on_master.accept_keys(dep, master, sorted(dep.outputs()["minions"]), ids)
        master.wait_responding(ids)

    def fresh(self, var_file):
        """kos converge on the cluster ``create`` left: wall-clock, keys included."""
        started = time.monotonic()
        result = self.converge_with(var_file, None)
        result["seconds"] = round(time.monotonic() - started, 1)
        return result

    def one(self, workers, public_key, row=None):
        row = {} if row is None else row
        row["workers"] = workers
        small, bigger = self.var_file(workers, public_key), self.var_file(workers + 1, public_key)
        try:
            self.down(small)
            self.create(small)
            self.measured(row, "fresh", small, lambda: self.fresh(small))
            if "noop" in self.measure:
                self.measured(row, "noop", small, lambda: self.converge_with(small, None))
            if "pillar" in self.measure:
                changed = self.changed_pillar(workers)
                self.measured(row, "pillar", small, lambda: self.converge_with(small, changed))
                self.measured(row, "direct", small, lambda: self.direct_highstate(small))
                row["pillar_vs_direct"] = round(
                    row["pillar"]["seconds"] / row["direct"]["seconds"], 2
                ) if row["direct"]["seconds"] else None
                # back to the repository's pillar (not measured), so adding a node is all
                # that changes next
                self.converge_with(small, None)

            def add_one():
                self.kos("up", "--cloud", "local", "--var-file", bigger, "--yes",
                         "--wait-minions", 1800)
                return {"seconds": self.converge_seconds(), "where": self.breakdown()}

            if "add_one" in self.measure:
                self.measured(row, "add_one", bigger, add_one)
            teardown = self.down(bigger)
            if teardown:
                raise RuntimeError(teardown)
            if "batch1" not in self.measure:
                return row
            if workers > self.baseline_max:
                row["batch1"] = {"skipped": f"--baseline-max {self.baseline_max}"}
                return row
            self.create(small)
            self.measured(row, "batch1", small, lambda: self.baseline(small))
            fresh, base = row["fresh"]["seconds"], row["batch1"]["seconds"]
            # a baseline that never converged is no baseline
            row["batch1_vs_fresh"] = round(base / fresh, 2) if fresh and \
                row["batch1"].get("clean") else None
        except Exception as exc:  # noqa: BLE001 - a failed size is a result, not the end
            row["error"] = f"{type(exc).__name__}: {exc}"
            # what failed where (an orchestration's failing states), not only the headline
            row["details"] = [str(d) for d in getattr(exc, "details", None) or []][:60]
            row["traceback"] = traceback.format_exc()[-3000:]
            print(f"bench: {workers} workers failed: {row['error'][:500]}", file=sys.stderr)
            for line in row["details"]:
                print(f"bench:   {line[:400]}", file=sys.stderr)
        finally:
            if self.keep_failed and "error" in row:
                print("bench: --keep-failed: the cluster stays up", file=sys.stderr, flush=True)
            else:
                for var_file in (bigger, small):
                    teardown = self.down(var_file)
                    if teardown:
                        row.setdefault("teardown_errors", []).append(teardown)
        return row


# -- output -----------------------------------------------------------------------------------


def write_json(path, args, rows, peak):
    result = {
        "control_planes": 1,
        "distribution": "microk8s (simulated)",
        "join_seconds": args.join_seconds,
        "steps": ["fresh"] + list(args.steps),
        "machine": {"cpus": os.cpu_count(), "peak_memory_used_mib": peak},
        "runs": rows,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")


def cell(row, step, key="seconds"):
    value = (row.get(step) or {}).get(key)
    return "-" if value is None else value


def table(rows, markdown=False):
    head = ["join s", "workers", "fresh", "no-op", "pillar", "direct", "add one", "batch-1",
            "highstates fresh/no-op/pillar/add", "CPU s master/node (fresh)",
            "CPU s master/node (add one)"]
    lines = []
    for r in rows:
        measured = [s for s in STEPS if isinstance(r.get(s), dict) and "seconds" in r[s]]
        if r.get("error") and not measured:
            lines.append([r["join_seconds"], r["workers"], "failed: " + r["error"][:60]]
                         + [""] * (len(head) - 3))
            continue
        counts = "/".join(str(cell(r, s, "highstates")) for s in ("fresh", "noop", "pillar",
                                                                   "add_one"))
        cpu = [f"{(r.get(s) or {}).get('cpu', {}).get('master', '-')}/"
               f"{(r.get(s) or {}).get('cpu', {}).get('per_node', '-')}" for s in ("fresh",
                                                                                   "add_one")]
        batch1 = cell(r, "batch1")
        if (r.get("batch1") or {}).get("clean") is False:
            batch1 = f"{batch1} (never clean)"
        # what a size measured before it failed (or was stopped) still counts
        workers = f"{r['workers']} (then failed: {r['error'][:60]})" if r.get("error") \
            else r["workers"]
        lines.append([r["join_seconds"], workers, cell(r, "fresh"), cell(r, "noop"),
                      cell(r, "pillar"), cell(r, "direct"), cell(r, "add_one"),
                      batch1, counts, *cpu])
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(str(v) for v in line) + " |" for line in lines]
        return "\n".join(out)
    return "\n".join("  ".join(str(v) for v in line) for line in [head, *lines])


def agent(work):
    key = work / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    sock = work / "agent.sock"
    proc = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    for _ in range(100):
        if sock.exists():
            break
        time.sleep(0.05)
    env = {"SSH_AUTH_SOCK": str(sock)}
    subprocess.run(["ssh-add", "-q", str(key)], env={**os.environ, **env}, check=True)
    return proc, env, (work / "id_ed25519.pub").read_text().strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, nargs="+", default=[5, 25, 50])
    ap.add_argument("--join-seconds", type=float, nargs="+", default=[2.0, 30.0],
                    help="simulated duration of every join and init (default: 2 and 30)")
    ap.add_argument("--keep-failed", action="store_true",
                    help="leave a size that failed running (to look at it), and stop there")
    ap.add_argument("--baseline-max", type=int, default=1000,
                    help="run the batch-1 baseline only up to this many workers (it converges "
                    "one node at a time: at 50 workers and 30 s joins, about half an hour)")
    ap.add_argument("--steps", nargs="+", choices=[s for s in STEPS if s not in ("fresh",
                                                                                "direct")],
                    default=[s for s in STEPS if s not in ("fresh", "direct")],
                    help="which steps to measure after the fresh converge, which always "
                    "runs (pillar includes the direct highstate); default: all")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    ap.add_argument("--json", default=str(REPO / "bench" / "results" / f"converge-{stamp}.json"),
                    help="where to write the figures")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench/converge.py needs root (the local cloud does)", file=sys.stderr)
        return 2
    memory = MemoryPeak()
    memory.start()
    rows = []
    # Not a TemporaryDirectory: a cluster that could not be torn down keeps mounts in it,
    # and its removal must not end the bench (it is named in the output instead).
    work = Path(tempfile.mkdtemp(prefix="kos-bench-"))
    proc, env, public_key = agent(work)
    try:
        for join in args.join_seconds:
            bench = Bench(work, join, env, args.baseline_max, args.keep_failed, args.steps)
            bench.save = lambda: write_json(Path(args.json), args, rows, memory.peak)
            for n in args.workers:
                print(f"bench: {n} workers, joins of {join:g} s ...", file=sys.stderr, flush=True)
                row = {"join_seconds": join}
                rows.append(row)
                try:
                    bench.one(n, public_key, row)
                except KeyboardInterrupt:
                    row["error"] = "interrupted (SIGINT): the steps not in this row did not end"
                    bench.save()
                    print(f"bench: interrupted; figures so far in {args.json}", file=sys.stderr)
                    return 130
                bench.save()
                if args.keep_failed and "error" in row:
                    print(f"bench: stopped; the failed cluster and {work} stay", file=sys.stderr)
                    return 1
    finally:
        proc.terminate()
        memory.stop.set()
        memory.join()
    write_json(Path(args.json), args, rows, memory.peak)
    left = nspawns(rf"kos-{CLUSTER}-.+")
    if left:
        print(f"bench: machines left running, work directory kept: {work}", file=sys.stderr)
    else:
        shutil.rmtree(work, ignore_errors=True)
    print("Converge on the local cloud, 1 control plane, microk8s simulated. Seconds (fresh "
          "and batch-1 from every key presented, the others from every minion connected); "
          "highstates per step; CPU-seconds of the hosts.")
    print(table(rows))
    print()
    print(table(rows, markdown=True))
    total = int(Path("/proc/meminfo").read_text().split()[1]) // 1024
    print(f"peak memory used on this machine: {memory.peak} MiB of {total} MiB; "
          f"figures in {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
