"""The pillar validator: each kind of bad input gives one error naming the key and the fix."""

import copy

import pytest

from tests.unit.conftest import load

kos = load("modules", "kos")

GOOD = {
    "kos": {
        "domain": "prod.example.com",
        "networks": {"private_cidr": "10.1.0.0/16", "public_cidr": "10.0.0.0/16",
                     "pod_cidr": "10.244.0.0/16", "service_cidr": "10.96.0.0/12"},
        "salt_master": {"id": "salt.prod.example.com", "ip": "10.1.0.5"},
        "nodes": {
            "k8s-cp-1.prod.example.com": {"role": "control_plane", "ip": "10.1.0.11", "floating_ip": "203.0.113.10"},
            "k8s-worker-1.prod.example.com": {"role": "worker", "ip": "10.1.0.21"},
        },
        "first_control_plane": "k8s-cp-1.prod.example.com",
        "api": {"floating_ip": "203.0.113.10", "admin_ip": None},
    },
    "kubernetes": {"distribution": "microk8s"},
    "core": {"users": [{"name": "alice", "ssh_keys": ["ssh-ed25519 AAAAC3Nza alice@laptop"], "sudo": True}],
             "nameservers": ["9.9.9.9"], "sshd": {"port": 22}},
    "microk8s": {"channel": "1.31/stable", "addons": {"dns": True, "metallb": {"enabled": True, "args": ["10.0.0.240-10.0.0.250"]}},
                 "token": {"ttl": 7200, "min_remaining": 1800}},
    "file_transfer": {"files": [{"path": "/etc/motd.d/x", "source": "salt://files/x", "mode": "0644"}]},
}


def with_value(path, value):
    data = copy.deepcopy(GOOD)
    node = data
    keys = path.split(":")
    for key in keys[:-1]:
        node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
    if value is DELETE:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return data


DELETE = object()


def test_good_pillar_has_no_errors():
    assert kos.check_pillar(GOOD) == []


@pytest.mark.parametrize(
    "path, value, key, words",
    [
        ("kos:networks:private_cidr", "10.1.0.0/33", "kos:networks:private_cidr", "not a valid CIDR"),
        ("kos:networks:private_cidr", "10.1.0.1/16", "kos:networks:private_cidr", "not a valid CIDR"),
        ("kos:networks:pod_cidr", "10.1.128.0/17", "kos:networks:pod_cidr", "overlaps the private network"),
        ("kos:networks:private_cidr", DELETE, "kos:networks:private_cidr", "is missing"),
        ("kos:first_control_plane", DELETE, "kos:first_control_plane", "is missing"),
        ("kos:first_control_plane", "k8s-worker-1.prod.example.com", "kos:first_control_plane", "not a control_plane"),
        ("kos:domain", "Prod_Example", "kos:domain", "not a DNS name"),
        ("kubernetes:distribution", "k3s", "kubernetes:distribution", "unknown distribution"),
        ("kos:nodes:k8s-worker-1.prod.example.com:role", "master", "kos:nodes:k8s-worker-1.prod.example.com:role", "unknown role"),
        ("kos:nodes:k8s-worker-1.prod.example.com:ip", "192.168.1.4", "kos:nodes:k8s-worker-1.prod.example.com:ip", "outside the private network"),
        ("microk8s:addons:dnss", True, "microk8s:addons:dnss", "unknown addon"),
        ("microk8s:addons:dns", "yes", "microk8s:addons:dns", "must be a bool"),
        ("microk8s:channel", "1.31", "microk8s:channel", "not a snap channel"),
        ("microk8s:token:ttl", 600, "microk8s:token:ttl", "not above min_remaining"),
        ("core:sshd:port", "22", "core:sshd:port", "must be a int"),
        ("core:sshd:port", True, "core:sshd:port", "must be a int"),
        ("core:sshd:port", 70000, "core:sshd:port", "not a TCP port"),
        ("core:nameservers", ["dns.example"], "core:nameservers:0", "not an IP address"),
        ("core:users:0:name", "Alice Smith", "core:users:0:name", "not a valid login name"),
        ("core:users:0:ssh_keys", ["hunter2"], "core:users:0:ssh_keys:0", "not an OpenSSH public key"),
        ("core:users", {"alice": {}}, "core:users", "must be a list"),
        ("file_transfer:files:0:source", "/tmp/x", "file_transfer:files:0:source", "salt://"),
        ("file_transfer:files:0:mode", 644, "file_transfer:files:0:mode", "must be a str"),
    ],
)
def test_each_bad_value_names_its_key(path, value, key, words):
    errors = kos.check_pillar(with_value(path, value))
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"pillar key '{key}': ")
    assert words in errors[0]
    assert ";" in errors[0]  # ... and says how to fix it


def test_errors_are_collected_not_stopped_at_the_first():
    data = with_value("microk8s:addons:dnss", True)
    data["kos"]["networks"]["private_cidr"] = "nonsense"
    assert len(kos.check_pillar(data)) == 2
