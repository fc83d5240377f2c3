"""
The kubeadm cluster on the rehearsal cloud is real Kubernetes: kubeadm, the kubelet, etcd
and the control plane built from source (kos_local.kubernetes), installed by the formula
from the cloud's mirror, joined through the same states as on OpenStack, networked by
the formula's routed pod network. Looked at as an operator would: through ``kos
kubeconfig`` and kubectl from this machine, and kubectl on the first control plane.

A small program (tests/e2e/probe) runs in a pod on every node to show what the network
does: pods reach each other across nodes without NAT, and through a Service's name.
"""

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from kos_local import kubernetes
from tests.e2e.conftest import operator_kubectl
from tests.e2e.test_standins_match_real import RealNode
from tests.standins import scenarios

pytestmark = pytest.mark.netns

PROBE_DIR = Path(__file__).resolve().parent / "probe"
PROBE_IMAGE = "localhost/kos-probe:e2e"
PROBE_MANIFEST = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: kos-probe
  namespace: default
spec:
  selector:
    matchLabels: {app: kos-probe}
  template:
    metadata:
      labels: {app: kos-probe}
    spec:
      tolerations:
        - {key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}
      containers:
        - name: probe
          image: %s
          imagePullPolicy: Never
          args: [serve]
          ports: [{containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata:
  name: kos-probe
  namespace: default
spec:
  selector: {app: kos-probe}
  ports: [{port: 8080, targetPort: 8080}]
""" % PROBE_IMAGE


def kubectl(cluster, *args, timeout=60, check=True, stdin=None, via="k8s-cp-1"):
    """kubectl on a control plane (the first one unless ``via`` names another), with its
    admin kubeconfig."""
    res = cluster.host(via).run(
        "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", *args,
        timeout=timeout, check=False, input=stdin)
    if check:
        assert res.returncode == 0, (args, res.stderr[-1500:])
    return res


def probe_get(cluster, pod, url, attempts=3):
    """The probe's ``get`` run in ``pod`` through ``kubectl exec``. A stream that broke
    between kubectl, the API server and the kubelet (kubectl says only ``error: EOF``,
    seen once under a loaded CI machine) is a fault of the exec, not an answer from the
    network under test, so it is tried again; whatever the probe itself says is returned
    (kubectl then adds ``command terminated with exit code N``)."""
    for _ in range(attempts):
        res = kubectl(cluster, "exec", pod, "--", "/usr/local/bin/probe", "get", url,
                      check=False)
        if res.returncode == 0 or "command terminated with exit code" in res.stderr:
            return res
        time.sleep(2)
    return res


def kube_json(cluster, *args):
    return json.loads(kubectl(cluster, *args, "-o", "json").stdout)


def wait_for(what, probe, timeout=180, interval=3):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        ok, last = probe()
        if ok:
            return last
        time.sleep(interval)
    pytest.fail(f"{what} after {timeout}s: {last}")


def test_every_node_is_ready_in_the_real_api_on_the_built_version(real, tmp_path):
    # the operator's way in: kos kubeconfig, and a kubectl of the same release
    config = tmp_path / "kubeconfig"
    res = real.kos("kubeconfig", *real.args, "--output", config, timeout=300)
    assert res.returncode == 0, res.stderr[-1500:]
    out = subprocess.run(operator_kubectl(config, "get", "nodes", "-o", "json",
                                          "--request-timeout=20s"),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    items = json.loads(out.stdout)["items"]
    assert sorted(n["metadata"]["name"] for n in items) == sorted(
        h for h in real.hostnames() if h.startswith("k8s-"))
    for node in items:
        name = node["metadata"]["name"]
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
        assert ready == "True", name
        info = node["status"]["nodeInfo"]
        assert info["kubeletVersion"] == kubernetes.pinned_version(), name
        assert info["containerRuntimeVersion"].startswith("containerd://"), name
        # the controller manager gave every node a pod CIDR inside the cluster's
        assert node["spec"]["podCIDR"].startswith("10.244."), name


def test_the_control_plane_etcd_coredns_and_kube_proxy_run(real):
    pods = {p["metadata"]["name"]: p for p in
            kube_json(real, "-n", "kube-system", "get", "pods")["items"]}

    def ready(pod):
        statuses = pod["status"].get("containerStatuses") or []
        return pod["status"]["phase"] == "Running" and statuses and all(
            c.get("ready") for c in statuses)

    for cp in ("k8s-cp-1", "k8s-cp-2", "k8s-cp-3"):
        for component in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            name = f"{component}-{cp}"
            assert name in pods and ready(pods[name]), name
    dns = [p for n, p in pods.items() if n.startswith("coredns-")]
    assert len(dns) == 2 and all(ready(p) for p in dns)
    # kubeadm put both on k8s-cp-1, the only node then; kos spread them once others joined,
    # so cluster DNS survives any one node
    assert len({p["spec"]["nodeName"] for p in dns}) == 2, [p["spec"]["nodeName"] for p in dns]
    proxies = [p for n, p in pods.items() if n.startswith("kube-proxy-")]
    assert len(proxies) == len(real.values["kubernetes_nodes"]) and all(ready(p) for p in proxies)


def etcdctl(cluster, via, *args):
    """etcdctl in ``via``'s etcd Pod, against that member."""
    return kubectl(cluster, "-n", "kube-system", "exec", f"etcd-{via}", "--", "etcdctl",
                   "--endpoints=https://127.0.0.1:2379",
                   "--cacert=/etc/kubernetes/pki/etcd/ca.crt",
                   "--cert=/etc/kubernetes/pki/etcd/server.crt",
                   "--key=/etc/kubernetes/pki/etcd/server.key", *args, check=False, via=via)


def etcd_members(cluster, via="k8s-cp-1"):
    """``{name: ID}`` of etcd's members as ``via``'s member lists them (a member whose
    join never started it has no name: ""), or etcdctl's complaint."""
    res = etcdctl(cluster, via, "member", "list", "-w", "json")
    if res.returncode != 0:
        return res.stderr[-300:]
    return {m.get("name", ""): m["ID"] for m in json.loads(res.stdout).get("members", [])}


def test_etcd_has_a_member_on_every_control_plane(real):
    assert sorted(etcd_members(real)) == ["k8s-cp-1", "k8s-cp-2", "k8s-cp-3"]


def test_the_first_control_plane_lays_its_certificates_out_as_the_stand_in(real):
    """The stand-in's layout for the node that ran ``kubeadm init`` (it alone holds
    super-admin.conf), held to k8s-cp-1 here, while it still is that node:
    test_replace_node.py rebuilds it as a control plane that joins.
    test_standins_match_real.py holds the layout of a joined node to k8s-cp-2."""
    scenarios.certs_check_expiration_layout(RealNode(real.host("k8s-cp-1")), initialised=True)


def import_probe(real, work):
    """The probe's image built into ``work`` and imported on every node."""
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false",
           "GOTOOLCHAIN": "local", "GOCACHE": str(kubernetes.go_root() / "build"),
           "GOMODCACHE": str(kubernetes.go_root() / "mod")}
    subprocess.run(["go", "build", "-o", str(work / "probe"), "."], cwd=PROBE_DIR, env=env,
                   check=True, capture_output=True, timeout=600)
    archive = work / "probe.tar"
    kubernetes.write_image(archive, PROBE_IMAGE,
                           {"bin": ["probe"], "entrypoint": ["/usr/local/bin/probe"]}, work)
    for hostname in real.hostnames():
        if hostname.startswith("k8s-"):
            host = real.host(hostname)
            host.write("/root/kos-probe.tar", archive.read_bytes())
            host.run("ctr", "-n", "k8s.io", "images", "import", "/root/kos-probe.tar",
                     timeout=120)


@pytest.fixture(scope="module")
def probes(real, tmp_path_factory):
    """The probe on every node, as a DaemonSet behind a Service."""
    import_probe(real, tmp_path_factory.mktemp("kos-probe"))
    kubectl(real, "apply", "-f", "-", stdin=PROBE_MANIFEST)

    def all_running():
        items = kube_json(real, "get", "pods", "-l", "app=kos-probe")["items"]
        up = {p["spec"]["nodeName"]: (p["metadata"]["name"], p["status"].get("podIP"))
              for p in items if p["status"]["phase"] == "Running"
              and all(c.get("ready") for c in p["status"].get("containerStatuses", []))}
        return len(up) == len(real.values["kubernetes_nodes"]), up

    yield wait_for("a probe pod running on every node", all_running)
    # through k8s-cp-2: the module's last test leaves k8s-cp-1's server off
    kubectl(real, "delete", "-f", "-", stdin=PROBE_MANIFEST, check=False, via="k8s-cp-2")


def test_pods_reach_each_other_across_nodes_without_nat(real, probes):
    for node, (pod, ip) in sorted(probes.items()):
        for other, (peer, peer_ip) in sorted(probes.items()):
            if other == node:
                continue
            res = probe_get(real, pod, f"http://{peer_ip}:8080/")
            assert res.returncode == 0, (node, other, res.stderr[-500:])
            # the peer answers with its name and the address it saw: the client pod's own
            assert res.stdout.split() == [peer, ip], (node, other)


def test_a_service_answers_by_name_through_coredns_and_kube_proxy(real, probes):
    names = {name for name, _ in probes.values()}
    for node, (pod, _) in sorted(probes.items()):
        res = probe_get(real, pod, "http://kos-probe.default.svc.cluster.local:8080/")
        assert res.returncode == 0, (node, res.stderr[-500:])
        assert res.stdout.split()[0] in names, node


class Probes:
    """kubectl from this machine through the API's load balancer (the kubeconfig ``kos
    kubeconfig`` wrote), one request at a time, in a thread of its own while servers stop:
    what an operator's session sees. A read through etcd, not /readyz, which an API server
    shutting down fails on purpose while it still serves requests."""

    def __init__(self, config, interval=0.5):
        self.argv = operator_kubectl(config, "get", "namespace", "kube-system", "-o", "name",
                                     "--request-timeout=3s")
        self.interval = interval
        self.results = []
        self._stop = threading.Event()
        self._thread = None

    def one(self):
        began = time.monotonic()
        try:
            ok = subprocess.run(self.argv, capture_output=True, timeout=10).returncode == 0
        except subprocess.TimeoutExpired:
            ok = False
        return began, time.monotonic() - began, ok

    def _run(self):
        while not self._stop.is_set():
            self.results.append(self.one())
            self._stop.wait(self.interval)

    def __enter__(self):
        self.results, self._stop = [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def during(self, seconds):
        """(start, duration, answered) of each probe for ``seconds``."""
        with self:
            time.sleep(seconds)
        return self.results


def failed_seconds(results):
    """The time the probes that failed took, and the gaps after them: seconds without an
    answer."""
    lost = 0.0
    for (start, took, ok), nxt in zip(results, results[1:] + [None]):
        if not ok:
            lost += (nxt[0] - start) if nxt else took
    return lost


def stop_and_probe(real, probes, name, settle=40):
    """Stop ``name``'s server while the probes run, until ``settle`` seconds after it is
    off; the load balancer must have taken it out of the pool by the end."""
    conn = real.conn()
    server = real.server(name)
    with probes:
        conn.compute.stop_server(server)
        conn.compute.wait_for_server(server, status="SHUTOFF", wait=180)
        time.sleep(settle)
    results = probes.results
    failed = [r for r in results if not r[2]]
    print(f"\nAPI failover, {name} stopped: {len(failed)} of {len(results)} probes failed, "
          f"{failed_seconds(results):.1f}s without an answer")
    # every probe of the last 15 s answered
    tail = [r for r in results if r[0] > results[-1][0] - 15]
    assert tail and all(ok for _, _, ok in tail), (name, failed)
    return server


def test_the_api_answers_through_its_load_balancer_with_any_control_plane_off(real, tmp_path):
    """The API's Octavia load balancer (api_load_balancer = "octavia"): kubectl from this
    machine through its floating IP keeps answering while a control plane's server is off,
    k8s-cp-3's (started again and back in the pool), then the first one's; in-cluster
    clients (a worker's kubelet credential, through the VIP) too. The first server stays
    off: test_replace_node.py, next, rebuilds it as a dead server is rebuilt."""
    config = tmp_path / "kubeconfig"
    res = real.kos("kubeconfig", *real.args, "--output", config, timeout=300)
    assert res.returncode == 0, res.stderr[-1500:]
    lb = real.outputs()["api_load_balancer"]
    assert f"server: https://{lb['floating_ip']}:6443" in config.read_text()
    probes = Probes(config)
    assert all(ok for _, _, ok in probes.during(3)), "no answer before any stop"
    conn = real.conn()
    lbs = conn.load_balancer
    [pool] = lbs.get_load_balancer(lb["id"]).pools

    def online(name):
        def member():
            status = {m.name: m.operating_status for m in lbs.members(pool["id"])}
            return status.get(name) == "ONLINE", status
        return member

    server = stop_and_probe(real, probes, "k8s-cp-3")
    wait_for("k8s-cp-3 out of the pool", lambda: (not online("k8s-cp-3")()[0], None), 60)
    conn.compute.start_server(server)
    conn.compute.wait_for_server(server, status="ACTIVE", wait=180)
    wait_for("k8s-cp-3 back in the pool", online("k8s-cp-3"), timeout=300, interval=5)
    # and back in etcd's quorum, which the first one's stop next leaves two members of three
    wait_for("k8s-cp-3's etcd member healthy", lambda: (
        etcdctl(real, "k8s-cp-3", "endpoint", "health").returncode == 0, None),
        timeout=180, interval=5)

    stop_and_probe(real, probes, "k8s-cp-1")
    worker = real.host("k8s-worker-1")

    def through_the_vip():
        res = worker.run("kubectl", "--kubeconfig", "/etc/kubernetes/kubelet.conf", "get",
                         "nodes", "-o", "name", "--request-timeout=10s", check=False,
                         timeout=60)
        return res.returncode == 0 and "node/k8s-cp-1" in res.stdout, res.stderr[-300:]

    for _ in range(5):
        wait_for("the API through the VIP from a worker", through_the_vip, timeout=60)
