"""
Persistent volumes through the real Cinder CSI (issue 47, item 4): cinder-csi-plugin and
the sidecars built from source (kos_local.csi), the controller on the control planes with
the cloud controller's credential, the node service on every node, the rehearsal cloud's
real Cinder and Nova attaching volumes to running hosts. A claim of the default
StorageClass gets a Cinder volume of the cluster, attached to its Pod's node; the Pod's
data survives a drain that moves it to another node in another zone; the claim grows and
its file system with it; deleting the claim deletes the volume.
"""

import json
import time

import pytest

from tests.e2e.test_real_kubernetes import (PROBE_IMAGE, import_probe, kube_json, kubectl,
                                            wait_for)

pytestmark = pytest.mark.netns

NAME = "kos-e2e-data"
DRIVER = "cinder.csi.openstack.org"
CLUSTER_KEY = "cinder.csi.openstack.org/cluster"
GIB = 1024 ** 3
MANIFEST = """\
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %(name)s, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: %(name)s, namespace: default}
spec:
  replicas: 1
  strategy: {type: Recreate}
  selector: {matchLabels: {app: %(name)s}}
  template:
    metadata: {labels: {app: %(name)s}}
    spec:
      nodeSelector: {node-role.kubernetes.io/worker-csi: ""}
      containers:
        - name: probe
          image: %(image)s
          imagePullPolicy: Never
          args: [serve]
          volumeMounts: [{name: data, mountPath: /data}]
      volumes:
        - name: data
          persistentVolumeClaim: {claimName: %(name)s}
""" % {"name": NAME, "image": PROBE_IMAGE}
WORKERS = ("k8s-worker-1", "k8s-worker-2")
LABEL = "node-role.kubernetes.io/worker-csi"


def registered(real):
    """Every node's CSINode lists the driver: its node service answered the kubelet."""
    nodes = kube_json(real, "get", "csinode")["items"]
    missing = [n["metadata"]["name"] for n in nodes
               if DRIVER not in [d["name"] for d in n["spec"].get("drivers") or []]]
    return len(nodes) == len(real.values["kubernetes_nodes"]) and not missing, missing


def why(real):
    """What an operator looks at when a claim's Pod waits: its claim's and Pod's events,
    the CSI's Pods and the controller's last lines."""
    events = kubectl(real, "get", "events", "-o", "custom-columns=O:.involvedObject.name,"
                     "R:.reason,M:.message", "--no-headers", check=False).stdout
    pods = kubectl(real, "-n", "kube-system", "get", "pods", "-o", "wide", "-l",
                   "app in (csi-cinder-controllerplugin,csi-cinder-nodeplugin)",
                   check=False).stdout
    logs = kubectl(real, "-n", "kube-system", "logs", "deployment/csi-cinder-controllerplugin",
                   "--all-containers", "--tail=15", check=False).stdout
    return f"events:\n{events[-2500:]}\nCSI pods:\n{pods}\ncontroller:\n{logs[-3000:]}"


def running_pod(real):
    pods = kube_json(real, "get", "pods", "-l", f"app={NAME}")["items"]
    up = [p for p in pods if p["status"]["phase"] == "Running"
          and not p["metadata"].get("deletionTimestamp")
          and all(c.get("ready") for c in p["status"].get("containerStatuses", []))]
    return (True, up[0]) if up else (False, [(p["metadata"]["name"], p["status"]["phase"])
                                             for p in pods])


def probe(real, pod, *args):
    res = kubectl(real, "exec", pod["metadata"]["name"], "--", "/usr/local/bin/probe", *args)
    return res.stdout


def volume_of_claim(real, conn):
    pvc = kube_json(real, "get", "pvc", NAME)
    pv = kube_json(real, "get", "pv", pvc["spec"]["volumeName"])
    return conn.block_storage.get_volume(pv["spec"]["csi"]["volumeHandle"])


def attached_to(volume):
    return [a["server_id"] for a in volume.attachments or []]


@pytest.fixture(scope="module")
def workload(real, tmp_path_factory):
    import_probe(real, tmp_path_factory.mktemp("kos-probe"))
    for worker in WORKERS:
        kubectl(real, "label", "node", worker, f"{LABEL}=", "--overwrite")
    yield
    kubectl(real, "delete", "deployment,pvc", NAME, "--ignore-not-found", "--wait=false",
            check=False)
    for worker in WORKERS:
        kubectl(real, "uncordon", worker, check=False)
        kubectl(real, "label", "node", worker, f"{LABEL}-", check=False)


def test_exactly_one_default_storage_class_provisions_through_cinder(real):
    classes = kube_json(real, "get", "storageclass")["items"]
    default = [c["metadata"]["name"] for c in classes if c["metadata"].get(
        "annotations", {}).get("storageclass.kubernetes.io/is-default-class") == "true"]
    assert default == ["cinder"], classes
    cinder = next(c for c in classes if c["metadata"]["name"] == "cinder")
    assert cinder["provisioner"] == "cinder.csi.openstack.org"
    assert cinder["allowVolumeExpansion"] is True
    assert cinder["volumeBindingMode"] == "WaitForFirstConsumer"


def test_a_claim_gets_a_cinder_volume_that_follows_its_pod_grows_and_goes(real, workload):
    conn = real.conn()
    wait_for("the Cinder CSI registered on every node (nodes without it)",
             lambda: registered(real), timeout=600, interval=5)
    began = time.monotonic()
    kubectl(real, "apply", "-f", "-", stdin=MANIFEST)
    try:
        pod = wait_for("the claim's Pod running", lambda: running_pod(real), timeout=300,
                       interval=2)
    except pytest.fail.Exception as exc:
        pytest.fail(f"{exc}\n{why(real)}")
    print(f"\nPVC bound and its Pod running: {time.monotonic() - began:.0f}s")
    first = pod["spec"]["nodeName"]
    volume = volume_of_claim(real, conn)
    assert volume.metadata.get(CLUSTER_KEY) == real.name, volume.metadata
    assert volume.size == 1 and volume.status == "in-use", (volume.size, volume.status)
    assert attached_to(volume) == [real.server(first).id]
    probe(real, pod, "write", "/data/kept", "written on " + first)

    # a drain moves the Pod; the volume follows it to the other worker (the other zone)
    kubectl(real, "drain", first, "--ignore-daemonsets", "--delete-emptydir-data",
            "--timeout=240s", timeout=300)
    began = time.monotonic()

    def elsewhere():
        ok, found = running_pod(real)
        return ok and found["spec"]["nodeName"] != first, found
    pod = wait_for("the Pod running on the other worker", elsewhere, timeout=300, interval=2)
    print(f"drained: the Pod and its volume on {pod['spec']['nodeName']} in "
          f"{time.monotonic() - began:.0f}s")
    kubectl(real, "uncordon", first)
    assert probe(real, pod, "read", "/data/kept") == "written on " + first
    assert attached_to(volume_of_claim(real, conn)) == [real.server(pod["spec"]["nodeName"]).id]

    # the claim grows: Cinder extends the volume in use, the node grows the file system
    before = int(probe(real, pod, "size", "/data"))
    kubectl(real, "patch", "pvc", NAME, "-p",
            json.dumps({"spec": {"resources": {"requests": {"storage": "2Gi"}}}}))

    def grown():
        size = int(probe(real, pod, "size", "/data"))
        return size > 1.5 * GIB, (size, volume_of_claim(real, conn).size)
    wait_for("the file system grown to the claim's 2 GiB", grown, timeout=300, interval=3)
    assert before < 1.1 * GIB and volume_of_claim(real, conn).size == 2
    assert probe(real, pod, "read", "/data/kept") == "written on " + first

    # deleting the claim deletes the volume
    volume_id = volume_of_claim(real, conn).id
    kubectl(real, "delete", "deployment", NAME, "--wait=true", "--timeout=120s", timeout=150)
    kubectl(real, "delete", "pvc", NAME, "--wait=true", "--timeout=120s", timeout=150)

    def gone():
        left = conn.block_storage.find_volume(volume_id, ignore_missing=True)
        return left is None, left and left.status
    wait_for("the claim's Cinder volume deleted", gone, timeout=180)
