"""The simulated Kubernetes datastore (dqlite membership, node list, addon resources).

Real microk8s keeps these in dqlite, replicated across control-plane nodes.  The stand-in keeps
one JSON document per node next to the dqlite files and pushes every change to the other
members' cluster agents; the newest revision wins.
"""

import datetime
import json
import os
import random
import shutil
import uuid

from . import common, netinfo

DQLITE_PORT = "19001"
ROLE_NAMES = {0: "voter", 1: "standby", 2: "spare"}

# `kubectl get all` lines every running cluster shows (service/kubernetes makes it "ready").
BASE_RESOURCES = [
    "service/kubernetes",
    "pod/calico-node-7x4wq",
    "pod/calico-kube-controllers-77bd7c5b-k2gxw",
    "daemonset.apps/calico-node",
    "deployment.apps/calico-kube-controllers",
]


def backend(*parts):
    return common.data("var", "kubernetes", "backend", *parts)


def _store():
    return backend("kos-standin-datastore.json")


def lock():
    # Outside the backend dir: join/leave move that directory around.
    return common.flocked(common.data("var", "lock", ".kos-standin-datastore.lock"))


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def new_member(address, agent=None):
    return {"address": address, "id": random.getrandbits(63), "role": 2, "agent": agent}


def node_entry(name, ip, role, version):
    return {
        "name": name.lower(),
        "ip": ip,
        "role": role,
        "ready": True,
        "created": now_iso(),
        "uid": str(uuid.uuid4()),
        "version": version,
        "kernel": os.uname().release,
    }


def fresh(version, resources=None):
    me = new_member("127.0.0.1:" + DQLITE_PORT)
    ds = {
        "cluster_id": str(uuid.uuid4()),
        "revision": 1,
        "members": [me],
        "nodes": [node_entry(netinfo.hostname(), netinfo.default_ip(), "control-plane", version)],
        "resources": list(BASE_RESOURCES if resources is None else resources),
    }
    assign_roles(ds)
    return ds


def assign_roles(ds):
    """3 voters, then up to 3 standbys, the rest spares; below 3 members only the first votes
    (a 2-member cluster has a spare)."""
    members = ds["members"]
    for i, m in enumerate(members):
        if len(members) < 3:
            m["role"] = 0 if i == 0 else 2
        else:
            m["role"] = 0 if i < 3 else 1 if i < 6 else 2


def load():
    return common.read_json(_store())


def my_address():
    text = common.read_file(backend("info.yaml"), "")
    for line in text.splitlines():
        if line.startswith("Address:"):
            return line.split(":", 1)[1].strip()
    return None


def save(ds, my_addr=None):
    """Persist the document and render the dqlite files that reflect it."""
    os.makedirs(backend(), exist_ok=True)
    common.write_file(_store(), json.dumps(ds, indent=2, sort_keys=True) + "\n")
    lines = []
    for m in ds["members"]:
        lines += ["- Address: {}".format(m["address"]), "  ID: {}".format(m["id"]), "  Role: {}".format(m["role"])]
    common.write_file(backend("cluster.yaml"), "\n".join(lines) + "\n")
    my_addr = my_addr or my_address()
    for m in ds["members"]:
        if m["address"] == my_addr:
            info = "Address: {}\nID: {}\nRole: {}\n".format(m["address"], m["id"], m["role"])
            common.write_file(backend("info.yaml"), info)
            common.write_file(backend("localnode.yaml"), info)


def dqlite_info(ds):
    return [(m["address"], ROLE_NAMES[m["role"]]) for m in ds["members"]]


def split_endpoints(ds):
    """remove_node.py/leave.py get_dqlite_endpoints: (mine, others) by local IPs."""
    local = netinfo.local_ips()
    mine, others = [], []
    for m in ds["members"]:
        host = m["address"].rsplit(":", 1)[0]
        (mine if host in local else others).append(m["address"])
    return mine, others


def find_node(ds, name=None, ip=None):
    for n in ds["nodes"]:
        if (name is not None and n["name"] == name) or (ip is not None and n["ip"] == ip):
            return n
    return None


def has_resource(ds, check):
    return any(check in res + " " for res in ds["resources"])


def replicate(ds, exclude=()):
    """Push the document to every other member's agent; unreachable members are skipped."""
    from . import pki, transport  # late: only writers replicate

    me = my_address()
    payload = {"ca": pki.ca_fingerprint(), "datastore": ds}
    for m in ds["members"]:
        if not m.get("agent") or m["address"] == me or m["address"] in exclude:
            continue
        host, port = transport.split_hostport(m["agent"])
        try:
            transport.post(host, port, "/kos-standin/v1/datastore", payload, timeout=5)
        except OSError:
            continue


def reinit(version):
    """leave.py reinit_cluster: a fresh single-member dqlite, keeping the pre-join dqlite certs."""
    backup = backend() + ".backup"
    crt, key = None, None
    if os.path.isfile(os.path.join(backup, "cluster.crt")):
        crt = common.read_file(os.path.join(backup, "cluster.crt"))
        key = common.read_file(os.path.join(backup, "cluster.key"))
    else:
        crt = common.read_file(backend("cluster.crt"))
        key = common.read_file(backend("cluster.key"))
    shutil.rmtree(backend(), ignore_errors=True)
    os.makedirs(backend())
    if crt and key:
        common.write_file(backend("cluster.crt"), crt)
        common.write_file(backend("cluster.key"), key, mode=0o600)
    ds = fresh(version)
    save(ds, my_addr=ds["members"][0]["address"])
    return ds
