#!/usr/bin/env python3
"""
Rehearsal-cloud figures (not a test: it prints figures and never fails on a time).

One ``kos up --cloud local`` of examples/local.tfvars (1 control plane + 2 workers,
microk8s) in a scratch directory; then a second cluster of the same shape (and the same
addresses, in a project of its own) on the cloud the first left running; then ``kos down``
of both. Printed, and written as JSON to bench/results/cloud-<time>.json:

  images      building the cloud's and the hosts' images (0 when cached; with --fresh the
              cache is a new empty directory, so every build counts, the provider's too)
  cloud       bringing the cloud up: boot, Keystone bootstrap, catalog, services, seeding
              (the first cluster's; the second finds it up)
  apply       terraform apply of terraform/ against it (the real provider)
  first boot  every server's cloud-init, read from the consoles
  converge    keys, trees, sync, master configuration, orch.deploy
  up total    the whole kos up
  second      the second cluster's kos up on the running cloud, and its phases
  down        kos down of the second (the cloud stays), then of the first (the cloud goes)
  memory      the cloud's processes once the cluster converged: RSS summed, and PSS (shared
              pages counted once, in proportion), and the machine's peak (MemTotal -
              MemAvailable) over the whole run
  services    with the cluster converged and left alone, --idle seconds (default 60) of
              each of the cloud's systemd services: CPU (cores busy: CPU-seconds of its
              processes over the window's seconds) and PSS (MiB), from /proc in the
              cloud's PID namespace, grouped by the unit of each process's cgroup
  boot units  the slowest units of the cloud's boot (systemd-analyze blame inside it)
  volumes     with the cluster's own credential, as the Cinder CSI asks: a 1 GiB volume
              attached to a running worker (from the request to its disk in the host),
              extended in use to 2 GiB (to the host's disk at the new size) and detached
              (to the volume available and the disk gone), --rounds times; median seconds

Needs root. Run: sudo .venv/bin/python bench/cloud.py [--fresh]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bootstrap"))

from converge import MemoryPeak  # noqa: E402 - the same sampler as the converge bench
from kos.steps.converge import ConvergeStep  # noqa: E402
from kos_local import hosts, net  # noqa: E402
from kos_local.openstack.cloud import NAME  # noqa: E402

CLUSTER = "kosbenchc"
SECOND = "kosbenchd"
PHASES = {
    "images": ("local-images",),
    "cloud": ("local-cloud",),
    "apply": ("terraform-init", "terraform-apply"),
    "first boot": ("first-boot",),
    # every step converge runs
    "converge": tuple(s.value for s in ConvergeStep),
}


def cloud_processes(cloud=NAME):
    """The /proc entries of every process of the cloud machine (its PID namespace)."""
    return machine_processes(net.cloud_ns(cloud))


def machine_processes(name):
    """The /proc entries of every process of the machine ``name`` (its PID namespace)."""
    machine = hosts.Machine(name, "/nonexistent")
    pid1 = machine.pid1()
    if not pid1:
        return []
    ns = os.readlink(f"/proc/{pid1}/ns/pid")
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and os.readlink(proc / "ns" / "pid") == ns:
                found.append(proc)
        except OSError:
            continue
    return found


def cloud_memory(cloud=NAME):
    """RSS and PSS (MiB) of every process of the cloud machine (its PID namespace)."""
    return machine_memory(net.cloud_ns(cloud))


def machine_memory(name):
    """RSS and PSS (MiB) of every process of the machine ``name`` (its PID namespace)."""
    procs = machine_processes(name)
    if not procs:
        return None
    rss = pss = 0
    for proc in procs:
        try:
            for line in (proc / "smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            continue
    return {"rss_mib": rss // 1024, "pss_mib": pss // 1024}


def _unit(proc):
    """The systemd unit of a process, from its cgroup path (``-`` outside one)."""
    path = (proc / "cgroup").read_text().strip().splitlines()[-1].split(":", 2)[-1]
    units = [p for p in path.split("/") if p.endswith((".service", ".scope"))]
    return units[-1] if units else "-"


def _cpu_ticks(proc):
    fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)


def service_usage(seconds, cloud=NAME):
    """``{unit: {"cores", "pss_mib"}}`` of the cloud's services over ``seconds`` left alone:
    CPU-seconds of each unit's processes (those alive at both ends) per second."""
    def sample():
        out = {}
        for proc in cloud_processes(cloud):
            try:
                out[proc.name] = (_unit(proc), _cpu_ticks(proc))
            except (OSError, ValueError, IndexError):
                continue
        return out

    hz = os.sysconf("SC_CLK_TCK")
    before = sample()
    time.sleep(seconds)
    after = sample()
    usage = {}
    for pid, (unit, ticks) in after.items():
        row = usage.setdefault(unit, {"cores": 0.0, "pss_mib": 0.0})
        if pid in before:
            row["cores"] += (ticks - before[pid][1]) / hz / seconds
        try:
            pss = next(int(line.split()[1]) for line in
                       (Path("/proc") / pid / "smaps_rollup").read_text().splitlines()
                       if line.startswith("Pss:"))
            row["pss_mib"] += pss / 1024
        except (OSError, StopIteration):
            pass
    return {u: {k: round(v, 3 if k == "cores" else 1) for k, v in row.items()}
            for u, row in sorted(usage.items(), key=lambda kv: -kv[1]["cores"])}


def boot_units(cloud=NAME, top=12):
    """The slowest units of the cloud's boot, as ``systemd-analyze blame`` prints them."""
    machine = hosts.Machine(net.cloud_ns(cloud), "/nonexistent")
    try:
        res = machine.run("systemd-analyze", "blame", "--no-pager", check=False)
    except Exception as exc:  # noqa: BLE001 - a figure, not a failure
        return [f"systemd-analyze: {exc}"]
    return [line.strip() for line in res.stdout.splitlines()[:top]]


def operator(prefix):
    """A scratch operator: a directory, an SSH key in an agent of its own, the environment
    kos runs with. Returns ``(work, env, agent_pid, public_key)``; stop the agent after."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    key = work / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    agent = subprocess.run(["ssh-agent", "-a", str(work / "agent.sock")], capture_output=True,
                           text=True, check=True).stdout
    agent_pid = int(agent.split("SSH_AGENT_PID=")[1].split(";")[0])
    env = dict(os.environ, SSH_AUTH_SOCK=str(work / "agent.sock"), XDG_CONFIG_HOME=str(work))
    env["PYTHONPATH"] = str(REPO / "bootstrap")
    subprocess.run(["ssh-add", "-q", str(key)], env=env, check=True)
    return work, env, agent_pid, (work / "id_ed25519.pub").read_text().strip()


def run_kos(kos, verb, common, work, env):
    """One ``kos <verb> ... --yes`` in the scratch directory: what it returned, and its seconds."""
    started = time.monotonic()
    done = subprocess.run([*kos, verb, *common, "--yes"], cwd=work, env=env,
                          capture_output=True, text=True)
    return done, round(time.monotonic() - started, 1)


def phase_seconds(work, cluster, phases):
    """``{"<phase>_s": seconds}`` summed from kos's step records of ``cluster`` (0 for a
    phase kos did not reach)."""
    try:
        steps = json.loads((work / ".kos" / cluster / "steps.json").read_text())["steps"]
    except (OSError, ValueError, KeyError):
        steps = {}
    return {f"{phase}_s": round(sum(steps.get(n, {}).get("seconds") or 0 for n in names), 1)
            for phase, names in phases.items()}


def second_cluster(kos, public_key, env):
    """A second cluster's kos up on the running cloud, then its kos down (the cloud stays)."""
    work = Path(tempfile.mkdtemp(prefix="kos-bench-cloud-second-"))
    values = work / "bench.tfvars.json"
    values.write_text(json.dumps({"cluster_name": SECOND, "ssh_public_keys": [public_key]}))
    common = ["--cloud", "local", "--var-file", str(REPO / "examples" / "local.tfvars"),
              "--var-file", str(values)]
    env = dict(env, XDG_CONFIG_HOME=str(work))
    up, up_s = run_kos(kos, "up", common, work, env)
    found = {"up_total_s": up_s, "up_exit": up.returncode, **phase_seconds(work, SECOND, PHASES)}
    if up.returncode != 0:
        found["error"] = up.stderr[-2000:]
    down, found["down_s"] = run_kos(kos, "down", common, work, env)
    found["down_exit"] = down.returncode
    return found


def _until(check, timeout=300):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("no change within the wait")
        time.sleep(0.2)


def volume_ops(clouds_yaml, cluster, rounds):
    """Seconds of attach, in-use extend and detach of one volume on ``cluster``'s first
    worker, with the cluster's credential (kos's clouds.yaml entry ``kos-local-<cluster>``)."""
    from statistics import median

    from kos_local.openstack.cloud import Cloud
    from openstack import config, connection

    conf = config.OpenStackConfig(config_files=[str(clouds_yaml)], load_envvars=False)
    conn = connection.Connection(config=conf.get_one(cloud=f"kos-local-{cluster}"))
    server = conn.compute.find_server(f"{cluster}-k8s-worker-1")
    host = hosts.Machine(net.host_ns(NAME, server.id), Cloud().root / "hosts" / server.id)
    times = {"attach": [], "extend": [], "detach": []}
    for n in range(rounds):
        vol = conn.block_storage.create_volume(size=1, name=f"kos-bench-{cluster}-{n}")
        conn.block_storage.wait_for_status(vol, "available", wait=120)
        link = f"/dev/disk/by-id/virtio-{vol.id[:20]}"

        def disk(size, link=link):
            res = host.run("blockdev", "--getsize64", link, check=False)
            return res.returncode == 0 and int(res.stdout) == size

        try:
            began = time.monotonic()
            conn.compute.create_volume_attachment(server, volume_id=vol.id)
            _until(lambda: disk(1 << 30))
            times["attach"].append(time.monotonic() - began)
            conn.block_storage.wait_for_status(vol, "in-use", wait=120)
            began = time.monotonic()
            conn.block_storage.extend_volume(vol, 2)
            _until(lambda: disk(2 << 30))
            times["extend"].append(time.monotonic() - began)
            conn.block_storage.wait_for_status(vol, "in-use", wait=120)
            began = time.monotonic()
            conn.compute.delete_volume_attachment(server, vol.id)
            conn.block_storage.wait_for_status(vol, "available", wait=300, interval=0.5)
            _until(lambda: host.run("test", "-e", link, check=False).returncode != 0)
            times["detach"].append(time.monotonic() - began)
        finally:
            vol = conn.block_storage.get_volume(vol.id)
            if vol.status == "in-use":
                conn.compute.delete_volume_attachment(server, vol.id)
                conn.block_storage.wait_for_status(vol, "available", wait=300)
            conn.block_storage.delete_volume(vol.id)
            conn.block_storage.wait_for_delete(vol, wait=120)
    return {f"{op}_s": round(median(ts), 1) for op, ts in times.items() if ts}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fresh", action="store_true",
                        help="build every image (and the provider) into an empty cache")
    parser.add_argument("--idle", type=int, default=60,
                        help="seconds the cloud's services are measured left alone")
    parser.add_argument("--rounds", type=int, default=3,
                        help="attach, extend and detach rounds of a volume on a worker")
    args = parser.parse_args()
    work, env, agent_pid, public_key = operator("kos-bench-cloud-")
    if args.fresh:
        env["XDG_CACHE_HOME"] = str(work / "cache")
    values = work / "bench.tfvars.json"
    values.write_text(json.dumps({"cluster_name": CLUSTER, "ssh_public_keys": [public_key]}))
    kos = [sys.executable, "-m", "kos"]
    common = ["--cloud", "local", "--var-file", str(REPO / "examples" / "local.tfvars"),
              "--var-file", str(values)]
    peak = MemoryPeak()
    peak.start()
    result = {"fresh": args.fresh, "cluster": "1 control plane + 2 workers, microk8s"}
    try:
        up, result["up_total_s"] = run_kos(kos, "up", common, work, env)
        result["up_exit"] = up.returncode
        if up.returncode != 0:
            result["error"] = up.stderr[-2000:]
        result["memory"] = cloud_memory()
        if up.returncode == 0:
            result["boot_units"] = boot_units()
            result["idle_s"] = args.idle
            result["services"] = service_usage(args.idle)
            try:
                result["volumes"] = volume_ops(work / "openstack" / "clouds.yaml", CLUSTER,
                                               args.rounds)
            except Exception as exc:  # a figure missing, not the bench
                result["volumes"] = {"error": repr(exc)}
        images = [line for line in up.stderr.splitlines() if " built in " in line]
        result["images_built"] = images
        result.update(phase_seconds(work, CLUSTER, PHASES))
        if up.returncode == 0:
            result["second"] = second_cluster(kos, public_key, env)
    finally:
        down, result["down_s"] = run_kos(kos, "down", common, work, env)
        result["down_exit"] = down.returncode
        peak.stop.set()
        result["machine_peak_mib"] = peak.peak
        os.kill(agent_pid, 15)
    print(f"rehearsal cloud ({'fresh cache' if args.fresh else 'cached images'}), "
          f"{result['cluster']}:")
    for name in ("images_s", "cloud_s", "apply_s", "first boot_s", "converge_s", "up_total_s"):
        print(f"  {name[:-2]:<12} {result.get(name, '-'):>8} s")
    second = result.get("second") or {}
    print(f"  a second cluster on the running cloud: kos up {second.get('up_total_s', '-')} s "
          f"(cloud {second.get('cloud_s', '-')} s), its kos down {second.get('down_s', '-')} s")
    print(f"  {'down':<12} {result.get('down_s', '-'):>8} s (the last cluster, and the cloud)")
    for line in result.get("images_built", []):
        print(f"  {line.strip()}")
    mem = result.get("memory") or {}
    print(f"  cloud memory: RSS {mem.get('rss_mib', '-')} MiB summed, PSS {mem.get('pss_mib', '-')} MiB; "
          f"machine peak {result['machine_peak_mib']} MiB")
    services = result.get("services") or {}
    if services:
        total = sum(r["cores"] for r in services.values())
        print(f"  the cloud's services left alone for {result['idle_s']} s: {total:.2f} cores busy")
        print(f"    {'unit':<44} {'cores':>6} {'PSS MiB':>8}")
        for unit, row in services.items():
            print(f"    {unit:<44} {row['cores']:>6.3f} {row['pss_mib']:>8.1f}")
    volumes = result.get("volumes") or {}
    if volumes:
        print(f"  a volume on a running worker (median of {args.rounds}): attach "
              f"{volumes.get('attach_s', '-')} s, extend in use {volumes.get('extend_s', '-')} s, "
              f"detach {volumes.get('detach_s', '-')} s {volumes.get('error', '')}")
    for line in result.get("boot_units") or []:
        print(f"  boot: {line}")
    out = REPO / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"cloud-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"  JSON: {path}")
    second = result.get("second") or {}
    ok = [result.get("up_exit"), result.get("down_exit"), second.get("up_exit"),
          second.get("down_exit")]
    return 0 if ok == [0, 0, 0, 0] else 1


if __name__ == "__main__":
    sys.exit(main())
