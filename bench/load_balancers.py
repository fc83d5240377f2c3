#!/usr/bin/env python3
"""
Load-balancer figures on the rehearsal cloud (not a test: it prints figures and never
fails on them). One ``kos up --cloud local`` of a kubeadm cluster (3 control planes + 1
worker, ``api_load_balancer = "octavia"``) in a scratch directory, then ``kos down``.
Printed, and written as JSON to bench/results/load-balancers-<time>.json:

  up          kos up's seconds, its terraform apply's (the API load balancer included)
  api lb      the API load balancer's create: from Octavia's record of the load balancer
              to the listener Terraform sends once the load balancer is ACTIVE
  service     a Service of type LoadBalancer (the cloud-controller-manager, one request):
              seconds from kubectl apply to its address in the Service's status, to the
              first answer through that address, and for the Service's delete to take the
              load balancer away
  failover    each control plane's server stopped in turn (k8s-cp-1 last) while kubectl on
              this machine asks the API through the load balancer's floating IP every
              0.5 s, from the stop request to 40 s after the server is off: probes failed
              and seconds without an answer; then the server started again and the
              seconds until its pool member is ONLINE
  amphora     each amphora's memory: RSS and PSS (MiB) of the processes of its host

Needs root. Run: sudo .venv/bin/python bench/load_balancers.py
"""

import json
import subprocess
import sys
import time
import urllib.request
from datetime import datetime

from cloud import REPO, machine_memory, operator, phase_seconds, run_kos

sys.path.insert(0, str(REPO))
from kos_local import net  # noqa: E402
from kos_local.openstack.cloud import Cloud  # noqa: E402
from tests.e2e.conftest import node_map, operator_kubectl  # noqa: E402
from tests.e2e.test_real_kubernetes import Probes, failed_seconds  # noqa: E402

CLUSTER = "kosbenchl"
VALUES = {
    "cluster_name": CLUSTER, "kubernetes_distribution": "kubeadm",
    "kubernetes_nodes": node_map(3, 1), "api_load_balancer": "octavia",
    # the e2e clusters' addresses are 10.246-10.249, the other benches' 10.240-10.241
    "public_cidr": "10.242.0.0/24", "private_cidr": "10.243.0.0/24",
    "external_network_name": "public", "base_image": "debian-12-rehearsal",
    "ssh_allowed_cidrs": ["100.64.0.0/10"],
}
SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: kos-bench-lb, namespace: kube-system}
spec:
  type: LoadBalancer
  selector: {k8s-app: kube-dns}
  ports: [{name: health, port: 8080, targetPort: 8080, protocol: TCP}]
"""


def connection(work):
    from openstack import config, connection as sdk
    region = config.OpenStackConfig(
        config_files=[str(work / "openstack" / "clouds.yaml")]).get_one(f"kos-local-{CLUSTER}")
    return sdk.Connection(config=region)


def kubectl(config, *args, stdin=None):
    return subprocess.run(operator_kubectl(config, *args), input=stdin, capture_output=True,
                          text=True, timeout=120)


def until(probe, timeout, interval=1.0):
    """Seconds until ``probe()`` is true, or None after ``timeout``."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if probe():
            return round(time.monotonic() - began, 1)
        time.sleep(interval)
    return None


def api_lb(conn):
    lb = next(conn.load_balancer.load_balancers(name=f"{CLUSTER}-api"))
    listener = conn.load_balancer.get_listener(lb.listeners[0]["id"])
    seconds = (datetime.fromisoformat(listener.created_at)
               - datetime.fromisoformat(lb.created_at)).total_seconds()
    return {"api_lb_create_s": seconds}, lb


def service(config):
    found = {}
    began = time.monotonic()
    kubectl(config, "apply", "-f", "-", stdin=SERVICE)

    def address():
        out = kubectl(config, "-n", "kube-system", "get", "service", "kos-bench-lb", "-o",
                      "jsonpath={.status.loadBalancer.ingress[0].ip}").stdout.strip()
        found["address"] = out
        return bool(out)
    found["service_address_s"] = until(address, 600, 2)
    if found["address"]:
        def answers():
            try:
                with urllib.request.urlopen(f"http://{found['address']}:8080/health",
                                            timeout=3) as res:
                    return res.read().strip() == b"OK"
            except OSError:
                return False
        seconds = until(answers, 180)
        found["service_answer_s"] = (round(time.monotonic() - began, 1)
                                     if seconds is not None else None)
    began = time.monotonic()
    kubectl(config, "-n", "kube-system", "delete", "service", "kos-bench-lb", "--wait=true")
    found["service_delete_s"] = round(time.monotonic() - began, 1)
    return found


def failover(conn, config, lb):
    probes = Probes(config)
    pool = lb.pools[0]["id"]
    rows = {}
    for name in ("k8s-cp-3", "k8s-cp-2", "k8s-cp-1"):
        server = conn.compute.find_server(f"{CLUSTER}-{name}")
        with probes:
            conn.compute.stop_server(server)
            conn.compute.wait_for_server(server, status="SHUTOFF", wait=300)
            time.sleep(40)
        results = probes.results
        rows[name] = {"probes": len(results), "failed": sum(not ok for _, _, ok in results),
                      "without_answer_s": round(failed_seconds(results), 1)}
        began = time.monotonic()
        conn.compute.start_server(server)
        conn.compute.wait_for_server(server, status="ACTIVE", wait=300)

        def online():
            return any(m.name == name and m.operating_status == "ONLINE"
                       for m in conn.load_balancer.members(pool))
        seconds = until(online, 600, 5)
        rows[name]["back_in_pool_s"] = (round(time.monotonic() - began, 1)
                                        if seconds is not None else None)
        print(f"  {name} stopped: {rows[name]}", flush=True)
    return {"failover": rows}


def amphora_memory():
    cloud = Cloud()
    return {"amphora_memory": {
        amp.compute_id: machine_memory(net.host_ns(cloud.name, amp.compute_id))
        for amp in cloud.admin().load_balancer.amphorae() if amp.compute_id}}


def main():
    work, env, agent_pid, public_key = operator("kos-bench-lb-")
    values = work / "bench.tfvars.json"
    values.write_text(json.dumps({**VALUES, "ssh_public_keys": [public_key]}))
    kos = [sys.executable, "-m", "kos"]
    common = ["--cloud", "local", "--var-file", str(values)]
    row = {}
    try:
        up, row["up_s"] = run_kos(kos, "up", common, work, env)
        row["up_exit"] = up.returncode
        row.update(phase_seconds(work, CLUSTER, {"apply": ("terraform-apply",)}))
        if up.returncode != 0:
            row["error"] = up.stderr[-2000:]
        else:
            config = work / "kubeconfig"
            subprocess.run([*kos, "kubeconfig", *common, "--output", str(config)], cwd=work,
                           env=env, capture_output=True, check=True)
            conn = connection(work)
            figures, lb = api_lb(conn)
            row.update(figures)
            row.update(service(config))
            row.update(amphora_memory())
            row.update(failover(conn, config, lb))
    finally:
        down, row["down_s"] = run_kos(kos, "down", common, work, env)
        row["down_exit"] = down.returncode
        subprocess.run(["kill", str(agent_pid)], check=False)
    print(json.dumps(row, indent=2))
    out = REPO / "bench" / "results" / f"load-balancers-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(row, indent=2) + "\n")
    print(f"written to {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
