#!/usr/bin/env python3
"""
Bring-ups in a row on the rehearsal cloud (not a test: it prints what happened and never
fails on it). Issue 16 asks for the kubeadm end-to-end bring-up repeated without a failure:
each run is ``kos up --cloud local`` of one shape (by default the kubeadm end-to-end
cluster: 3 control planes + 1 worker) in a scratch directory, then ``kos down``. Printed
per run, and written as JSON to bench/results/bringups-<time>.json:

  up          kos up's exit code and seconds
  first boot  every server's cloud-init, read from the consoles
  converge    keys, trees, sync, master configuration, orch.deploy
  down        kos down's exit code
  error       the end of what a failed kos up printed

Needs root. Run: sudo .venv/bin/python bench/bringups.py [--runs 10] [--distribution kubeadm]
[--control-planes 3] [--nodes 4]
"""

import argparse
import json
import os
import subprocess
import sys
import time

from cloud import PHASES, REPO, operator, phase_seconds, run_kos

CLUSTER = "kosbenchb"
# The e2e clusters' addresses are 10.246-10.249; these stay clear of them.
ADDRESSES = {"public_cidr": "10.240.0.0/24", "private_cidr": "10.241.0.0/24"}
CLOUD = {"external_network_name": "public", "base_image": "debian-12-rehearsal",
         "ssh_allowed_cidrs": ["100.64.0.0/10"]}


def one_run(kos, common, work, env):
    row = {}
    up, row["up_s"] = run_kos(kos, "up", common, work, env)
    row["up_exit"] = up.returncode
    if up.returncode != 0:
        row["error"] = up.stderr[-1500:]
    row.update(phase_seconds(work, CLUSTER, {p: PHASES[p] for p in ("first boot", "converge")}))
    down, _ = run_kos(kos, "down", common, work, env)
    row["down_exit"] = down.returncode
    if down.returncode != 0:
        row["down_error"] = down.stderr[-800:]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--distribution", choices=("kubeadm", "microk8s"), default="kubeadm")
    parser.add_argument("--control-planes", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=4, help="Kubernetes nodes, control planes included")
    args = parser.parse_args()
    work, env, agent_pid, public_key = operator("kos-bench-bringups-")
    values = work / "bench.tfvars.json"
    values.write_text(json.dumps({
        "cluster_name": CLUSTER, "kubernetes_distribution": args.distribution,
        "num_control_plane": args.control_planes, "num_kube_nodes": args.nodes,
        "ssh_public_keys": [public_key], **ADDRESSES, **CLOUD,
    }))
    kos = [sys.executable, "-m", "kos"]
    common = ["--cloud", "local", "--var-file", str(values)]
    shape = (f"{args.control_planes} control planes + {args.nodes - args.control_planes} "
             f"workers, {args.distribution}")
    result = {"cluster": shape, "commit": _commit(), "runs": []}
    out = REPO / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"bringups-{time.strftime('%Y%m%d-%H%M%S')}.json"
    print(f"{args.runs} bring-ups in a row, {shape}:")
    print(f"  {'run':>3}  {'up':>4}  {'up s':>7}  {'first boot s':>12}  {'converge s':>10}  down")
    try:
        for i in range(1, args.runs + 1):
            row = one_run(kos, common, work, env)
            result["runs"].append(row)
            path.write_text(json.dumps(result, indent=2))
            print(f"  {i:>3}  {row['up_exit']:>4}  {row['up_s']:>7}  {row['first boot_s']:>12}  "
                  f"{row['converge_s']:>10}  {row['down_exit']}", flush=True)
            if "error" in row:
                print("       " + row["error"].strip().replace("\n", "\n       ")[-800:])
    finally:
        os.kill(agent_pid, 15)
    ok = sum(1 for r in result["runs"] if r["up_exit"] == 0 and r["down_exit"] == 0)
    print(f"  {ok} of {len(result['runs'])} clean (up and down exit 0)\n  JSON: {path}")
    return 0


def _commit():
    res = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                         capture_output=True, text=True)
    return res.stdout.strip() or None


if __name__ == "__main__":
    sys.exit(main())
