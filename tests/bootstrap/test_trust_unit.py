"""
Verified trust without daemons: what kos reads from a console, what it decides about a
minion key, and which SSH host keys it pins before connecting. The same decisions against
a real salt-master are in test_trust.py.
"""

import base64
import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import salt.crypt
import salt.utils.crypt
from kos import cloud, trust
from kos.errors import ConvergeError
from kos.onmaster_keys import key_finger
from kos.steps import hostkeys

FQDN = "k8s-worker-1.kos.internal"
FINGER = ":".join(["ab"] * 32)
OTHER = ":".join(["cd"] * 32)


def ssh_key(kind="ssh-ed25519", body=b"\x01" * 32):
    """A public key blob in SSH's wire format (length-prefixed type, then key data)."""
    name = kind.encode()
    raw = len(name).to_bytes(4, "big") + name + len(body).to_bytes(4, "big") + body
    return base64.b64encode(raw).decode()


ED25519 = ssh_key()
ECDSA = ssh_key("ecdsa-sha2-nistp256", b"\x02" * 64)

CONSOLE = f"""\
[    3.141592] EXT4-fs (vda1): mounted filesystem
Cloud-init v. 22.4.2 running 'modules:final'
cloud-init[130]: kos: interface eth0 (fa:16:3e:00:00:01, 10.20.0.21) configured as default
cloud-init[130]: kos-trust: {FQDN} ssh-host-key ssh-ed25519 {ED25519}\r
[   41.271828] cloud-init[130]: kos-trust: {FQDN} salt-minion-key sha256 {FINGER}
cloud-init[130]: kos: first boot done on {FQDN}: minion {FQDN}, master 10.20.0.10
-----BEGIN SSH HOST KEY KEYS-----
ecdsa-sha2-nistp256 {ECDSA} root@k8s-worker-1
ssh-ed25519 {ED25519} root@k8s-worker-1
-----END SSH HOST KEY KEYS-----
kos: cloud-init finished on {FQDN} after 42.17 seconds
"""


# -- reading a console ----------------------------------------------------------------------


def test_the_console_gives_the_minion_fingerprint_and_every_host_key():
    assert trust.parse_console(CONSOLE, FQDN) == {
        "minion_keys": [FINGER],
        "ssh_host_keys": sorted([f"ssh-ed25519 {ED25519}", f"ecdsa-sha2-nistp256 {ECDSA}"]),
    }


def test_marks_after_the_gettys_login_prompt_are_read():
    # agetty's prompt has no newline: the next console line, the mark here, joins it
    text = CONSOLE.replace("[   41.271828] cloud-init[130]: kos-trust:",
                           "k8s-worker-1 login: cloud-init[130]: kos-trust:")
    text = text.replace("-----BEGIN SSH", "k8s-worker-1 login: -----BEGIN SSH")
    assert trust.parse_console(text, FQDN) == trust.parse_console(CONSOLE, FQDN)
    assert trust.parse_console(text, FQDN)["minion_keys"] == [FINGER]


def test_a_console_speaks_for_its_own_server_only():
    other = CONSOLE.replace(f"kos-trust: {FQDN}", "kos-trust: k8s-cp-1.kos.internal")
    # cloud-init's block names no minion; it is the host's own
    assert trust.parse_console(other, FQDN) == {
        "minion_keys": [],
        "ssh_host_keys": sorted([f"ssh-ed25519 {ED25519}", f"ecdsa-sha2-nistp256 {ECDSA}"]),
    }


@pytest.mark.parametrize(
    "line",
    [
        f"kos-trust: {FQDN} salt-minion-key md5 {FINGER}",  # another digest
        f"kos-trust: {FQDN} salt-minion-key sha256 {FINGER[:-3]}",  # truncated
        f"kos-trust: {FQDN} ssh-host-key ssh-ed25519 {ECDSA}",  # blob of another type
        f"kos-trust: {FQDN} ssh-host-key ssh-ed25519 not/base64!",
        f"kos-trust: {FQDN} ssh-host-key x509-cert {ED25519}",
        f"user said: kos-trust: {FQDN} salt-minion-key sha256 {FINGER}",  # not a line start
        f"sshd[77]: kos-trust: {FQDN} salt-minion-key sha256 {FINGER}",  # not the boot script
        f"host login: sshd[77]: kos-trust: {FQDN} salt-minion-key sha256 {FINGER}",
        f"host login: user said: kos-trust: {FQDN} salt-minion-key sha256 {FINGER}",
    ],
)
def test_malformed_marks_are_not_evidence(line):
    assert trust.parse_console(line + "\n", FQDN) == {"minion_keys": [], "ssh_host_keys": []}


def test_two_different_fingerprints_are_both_kept():
    text = CONSOLE + f"kos-trust: {FQDN} salt-minion-key sha256 {OTHER}\n"
    assert trust.parse_console(text, FQDN)["minion_keys"] == [FINGER, OTHER]


def test_the_fingerprint_is_the_one_salt_call_key_finger_prints(tmp_path):
    # what the minion prints (salt.modules.key.finger reads minion.pub) is what the master's
    # side of kos computes from the pending key's text
    _, pub = salt.crypt.gen_keys(2048)
    path = tmp_path / "minion.pub"
    path.write_text(pub)
    assert key_finger(pub) == salt.utils.crypt.pem_finger(str(path), sum_type="sha256")
    assert trust.FINGER.match(key_finger(pub))


# -- deciding about a pending key ----------------------------------------------------------


def record(*fingers):
    return {"server": "k8s-worker-1", "minion_keys": list(fingers), "ssh_host_keys": []}


def test_a_key_matching_its_console_is_accepted():
    verdict = trust.judge(FQDN, FINGER, record(FINGER))
    assert (verdict.accept, verdict.verified) == (True, True)


@pytest.mark.parametrize("unverified", [False, True])
def test_a_key_differing_from_its_console_is_refused_whatever_the_flag(unverified):
    verdict = trust.judge(FQDN, OTHER, record(FINGER), trust_unverified=unverified)
    assert verdict.accept is False
    error = trust.refusal([verdict])
    assert isinstance(error, ConvergeError)
    for text in (FQDN, FINGER, OTHER, "left unaccepted"):
        assert text in error.problem
    assert f"salt-key -d {FQDN}" in error.fix and "trust.json" in error.fix


def test_a_console_with_two_fingerprints_verifies_nothing():
    verdict = trust.judge(FQDN, FINGER, record(FINGER, OTHER), trust_unverified=True)
    assert verdict.accept is False
    assert "2 different minion key fingerprints" in verdict.problem


def test_without_a_console_fingerprint_the_key_needs_the_operators_word():
    refused = trust.judge(FQDN, FINGER, None)
    assert refused.accept is False
    assert FINGER in refused.problem and "no minion key fingerprint" in refused.problem
    assert "--trust-unverified" in refused.fix and "key.finger" in refused.fix
    accepted = trust.judge(FQDN, FINGER, record(), trust_unverified=True)
    assert (accepted.accept, accepted.verified) == (True, False)


def test_several_refusals_are_one_error_naming_each():
    error = trust.refusal(
        [trust.judge(FQDN, OTHER, record(FINGER)), trust.judge("k8s-cp-1.kos.internal", FINGER, None)]
    )
    assert "k8s-worker-1.kos.internal, k8s-cp-1.kos.internal" in error.problem
    assert len(error.details) == 2 and OTHER in error.details[0]


# -- the record in the state directory -----------------------------------------------------


def test_a_reading_without_marks_keeps_what_the_same_server_printed(tmp_path):
    store = trust.Consoles(tmp_path)
    first = dict(record(FINGER), server_id="s-1")
    store.update({FQDN: first})
    # the console scrolled past the marks: the earlier reading stays
    store.update({FQDN: dict(record(), server_id="s-1")})
    assert store.load()[FQDN]["minion_keys"] == [FINGER]
    # a rebuilt server is another server: its (empty) reading replaces the old one
    store.update({FQDN: dict(record(), server_id="s-2")})
    assert store.load()[FQDN]["minion_keys"] == []
    assert json.loads((tmp_path / "trust.json").read_text())["minions"][FQDN]["server_id"] == "s-2"


# -- the first boot, read from the consoles ------------------------------------------------


class Console:
    """The compute API as wait_first_boot uses it: servers and their console output."""

    def __init__(self, servers):
        self.servers = servers
        self.calls = []

    def compute_servers(self, details=True):
        return list(self.servers.values())

    def get_server(self, sid):
        return self.servers[sid]

    def get_server_console_output(self, sid, length=None):
        self.calls.append((sid, length))
        text = self.servers[sid].console
        if length:
            text = "\n".join(text.splitlines()[-length:])
        return {"output": text}


def server(sid, name, console):
    return SimpleNamespace(
        id=sid,
        name=name,
        status="ACTIVE",
        fault=None,
        console=console,
        metadata={"kos_cluster": "kos", "kos_minion_id": f"{name}.kos.internal"},
    )


def conn_of(*servers):
    api = Console({s.id: s for s in servers})
    compute = SimpleNamespace(
        servers=api.compute_servers,
        get_server=api.get_server,
        get_server_console_output=api.get_server_console_output,
    )
    return SimpleNamespace(compute=compute), api


def test_first_boot_records_each_servers_marks_reading_the_whole_console_when_needed():
    noisy = CONSOLE.replace(
        f"kos: first boot done on {FQDN}",
        "\n".join(f"[ {i}.0] noise" for i in range(500)) + f"\nkos: first boot done on {FQDN}",
    )
    bare = "kos: first boot done on salt.kos.internal: minion salt.kos.internal\n"
    conn, api = conn_of(server("s-1", "k8s-worker-1", noisy), server("s-2", "salt", bare))
    seen = {}
    result = cloud.wait_first_boot(conn, "kos", interval=0, record=seen.update)
    assert result["booted"] == ["k8s-worker-1", "salt"]
    assert result["fingerprints"] == [FQDN]
    assert seen[FQDN]["minion_keys"] == [FINGER] and seen[FQDN]["server_id"] == "s-1"
    assert seen["salt.kos.internal"]["minion_keys"] == []
    # the marks had scrolled out of the 400-line tail: the whole console was read
    assert ("s-1", None) in api.calls


def test_a_server_booted_again_since_its_first_boot_is_not_a_failed_first_boot(tmp_path):
    # an operator's reboot: cloud-init runs again, the first-boot script (once per
    # instance) does not, and its line scrolls out of the console's tail
    again = (CONSOLE + "\n".join(f"[ {i}.0] reboot noise" for i in range(500))
             + f"\nkos: cloud-init finished on {FQDN} after 9.10 seconds\n")
    conn, api = conn_of(server("s-1", "k8s-worker-1", again))
    seen = {}
    assert cloud.wait_first_boot(conn, "kos", interval=0, record=seen.update)["booted"] == [
        "k8s-worker-1"]
    assert seen[FQDN]["minion_keys"] == [FINGER] and ("s-1", None) in api.calls

    # a console that no longer holds the first boot at all: what kos read of it then counts
    truncated = f"kos: cloud-init finished on {FQDN} after 9.10 seconds\n"
    conn, _ = conn_of(server("s-1", "k8s-worker-1", truncated))
    with pytest.raises(ConvergeError, match="the first boot of k8s-worker-1 failed"):
        cloud.wait_first_boot(conn, "kos", interval=0)
    store = trust.Consoles(tmp_path)
    store.update(seen)
    assert store.first_booted() == {"s-1"}
    assert cloud.wait_first_boot(conn, "kos", interval=0, booted=store.first_booted())[
        "booted"] == ["k8s-worker-1"]


def test_a_top_master_finds_the_syndic_clusters_masters_and_their_consoles():
    dev = server("s-9", "salt", CONSOLE.replace(FQDN, "salt.dev.internal"))
    dev.metadata = {"kos_cluster": "kos-dev", "kos_role": "salt_master",
                    "kos_minion_id": "salt.dev.internal"}
    node = server("s-8", "k8s-worker-1", CONSOLE)
    node.metadata = {"kos_cluster": "kos-dev", "kos_role": "worker"}
    conn, _ = conn_of(dev, node)
    found = cloud.read_master_consoles(conn, ["kos-dev", "kos-prod"])
    assert found["kos-prod"] is None
    mid, record = found["kos-dev"]
    assert mid == "salt.dev.internal" and record["minion_keys"] == [FINGER]


def test_first_boot_names_a_server_that_booted_without_an_address(capsys):
    said = CONSOLE.replace(
        "cloud-init[130]: kos: first boot done",
        "cloud-init[130]: kos: no DHCP lease on eth1 after 90 s; booting on without it\n"
        "cloud-init[130]: kos:   \u25cf 3: eth1\n"
        "cloud-init[130]: kos: first boot done")
    conn, _ = conn_of(server("s-1", "k8s-worker-1", said))
    result = cloud.wait_first_boot(conn, "kos", interval=0)
    assert result["booted"] == ["k8s-worker-1"]
    assert result["without_address"] == {"k8s-worker-1": ["eth1"]}
    assert "k8s-worker-1 booted without an address on eth1" in capsys.readouterr().err
    conn, _ = conn_of(server("s-1", "k8s-worker-1", CONSOLE))
    assert cloud.wait_first_boot(conn, "kos", interval=0)["without_address"] == {}


# -- SSH host keys -------------------------------------------------------------------------


def deployment(tmp_path, records=None, known_hosts=None, unverified=False, port=22):
    state = SimpleNamespace(path=tmp_path)
    if records is not None:
        trust.Consoles(tmp_path).update(records)
    return SimpleNamespace(
        state=state,
        backend=SimpleNamespace(),
        consoles_read=False,
        settings=SimpleNamespace(
            known_hosts=known_hosts,
            trust_unverified=unverified,
            ssh_port=port,
            outputs_file=None,
        ),
    )


OUTPUTS = {
    "bastion_floating_ip": "192.0.2.10",
    "salt_master_private_ip": "10.20.0.10",
    "minions": {
        "bastion.kos.internal": {"role": "bastion"},
        "salt.kos.internal": {"role": "salt_master"},
        FQDN: {"role": "worker"},
    },
}
BASTION_KEY = "ssh-ed25519 " + ssh_key(body=bytes([3]) * 32)
MASTER_KEY = "ssh-ed25519 " + ssh_key(body=bytes([4]) * 32)


def host_records():
    return {
        "bastion.kos.internal": {"server_id": "b", "minion_keys": [], "ssh_host_keys": [BASTION_KEY]},
        "salt.kos.internal": {"server_id": "m", "minion_keys": [], "ssh_host_keys": [MASTER_KEY]},
    }


def known_hosts_lookup(path, host):
    res = subprocess.run(["ssh-keygen", "-F", host, "-f", str(path)], capture_output=True, text=True)
    return sorted(" ".join(line.split()[1:]) for line in res.stdout.splitlines() if line and line[0] != "#")


@pytest.mark.parametrize("port", [22, 2222])
def test_the_bastion_and_master_keys_are_pinned_from_their_consoles(tmp_path, port):
    known = tmp_path / "known_hosts"
    # an old key of the master (before a rebuild) and another host's line
    known.write_text(f"10.20.0.10 {BASTION_KEY}\n[10.99.0.1]:2222 {MASTER_KEY}\n")
    dep = deployment(tmp_path, host_records(), port=port)
    assert hostkeys.pin_host_keys(dep, OUTPUTS) is False  # strict checking
    bastion = "192.0.2.10" if port == 22 else f"[192.0.2.10]:{port}"
    master = "10.20.0.10" if port == 22 else f"[10.20.0.10]:{port}"
    assert known_hosts_lookup(known, bastion) == [BASTION_KEY]
    assert known_hosts_lookup(known, master) == [MASTER_KEY]
    assert f"[10.99.0.1]:2222 {MASTER_KEY}" in known.read_text()
    # again: nothing doubles
    hostkeys.pin_host_keys(dep, OUTPUTS)
    assert known_hosts_lookup(known, master) == [MASTER_KEY]


def test_the_operators_known_hosts_wins(tmp_path):
    mine = tmp_path / "mine"
    mine.write_text(f"192.0.2.10 {MASTER_KEY}\n")
    state = tmp_path / "state"
    state.mkdir()
    dep = deployment(state, host_records(), known_hosts=mine)
    assert hostkeys.pin_host_keys(dep, OUTPUTS) is False
    assert (state / "known_hosts").read_text() == mine.read_text()


def test_no_verified_host_key_is_refused_unless_the_operator_accepts_it(tmp_path):
    dep = deployment(tmp_path)
    with pytest.raises(ConvergeError) as refused:
        hostkeys.pin_host_keys(dep, OUTPUTS)
    assert "the bastion (192.0.2.10) and the salt master (10.20.0.10)" in refused.value.problem
    assert "--known-hosts" in refused.value.fix and "--trust-unverified" in refused.value.fix
    assert not (tmp_path / "known_hosts").exists()
    dep.settings.trust_unverified = True
    assert hostkeys.pin_host_keys(dep, OUTPUTS) is True  # accept-new, said so


def test_keys_pinned_earlier_stay_trusted(tmp_path):
    (tmp_path / "known_hosts").write_text(f"192.0.2.10 {BASTION_KEY}\n10.20.0.10 {MASTER_KEY}\n")
    assert hostkeys.pin_host_keys(deployment(tmp_path), OUTPUTS) is False


def test_a_node_kos_reaches_for_its_kubeconfig_is_pinned_from_its_console(tmp_path):
    node_key = "ssh-ed25519 " + ssh_key(body=bytes([5]) * 32)
    records = {**host_records(), FQDN: {"server_id": "w", "minion_keys": [],
                                        "ssh_host_keys": [node_key]}}
    dep = deployment(tmp_path, records)
    hostkeys.pin_node_host_key(dep, FQDN, "10.20.0.21")
    assert known_hosts_lookup(tmp_path / "known_hosts", "10.20.0.21") == [node_key]
    # a node whose console showed nothing: refused, unless the operator accepts it
    dep = deployment(tmp_path / "other")
    (tmp_path / "other").mkdir()
    with pytest.raises(ConvergeError) as refused:
        hostkeys.pin_node_host_key(dep, FQDN, "10.20.0.21")
    assert f"no verified SSH host key for {FQDN} (10.20.0.21)" in refused.value.problem
    assert "--trust-unverified" in refused.value.fix
    dep.settings.trust_unverified = True
    hostkeys.pin_node_host_key(dep, FQDN, "10.20.0.21")


def test_ssh_checks_host_keys_strictly_unless_told(tmp_path):
    from kos.ssh import Ssh

    strict = Ssh(tmp_path / "a", "192.0.2.10", "10.20.0.10", "debian")
    tofu = Ssh(tmp_path / "b", "192.0.2.10", "10.20.0.10", "debian", accept_new=True)
    try:
        assert "StrictHostKeyChecking yes" in strict.config.read_text()
        assert "StrictHostKeyChecking accept-new" in tofu.config.read_text()
    finally:
        strict.close()
        tofu.close()


def test_unverified_nodes_are_accepted_on_first_use_only_when_told(tmp_path):
    import subprocess

    from kos.ssh import Ssh

    def checking(ssh, host):
        # what ssh itself makes of the config kos wrote
        out = subprocess.run(["ssh", "-G", "-F", str(ssh.config), host], capture_output=True,
                             text=True, check=True).stdout
        return next(line.split()[1] for line in out.splitlines()
                    if line.startswith("stricthostkeychecking "))

    told = Ssh(tmp_path / "a", "192.0.2.10", "10.20.0.10", "debian", nodes_accept_new=True)
    strict = Ssh(tmp_path / "b", "192.0.2.10", "10.20.0.10", "debian")
    try:
        assert checking(told, "kos-node") == "accept-new"
        # the bastion and the master stay pinned: their keys came from their consoles
        assert checking(told, "kos-master") in ("yes", "true")
        assert checking(strict, "kos-node") in ("yes", "true")
    finally:
        told.close()
        strict.close()


def test_the_first_boot_script_prints_the_marks_kos_reads():
    script = (Path(__file__).resolve().parents[2] / "terraform/cloud-init/kos-firstboot.sh.tftpl")
    text = script.read_text()
    # the marks come before the line that tells kos the first boot is done
    assert text.index("print_trust\n") < text.index('say "first boot done on')
    assert 'echo "kos-trust: ${fqdn} salt-minion-key sha256 $finger"' in text
    assert 'echo "kos-trust: ${fqdn} ssh-host-key $kind $blob"' in text


WORKER_KEY = "ssh-ed25519 " + ssh_key(body=bytes([5]) * 32)


def test_every_node_its_console_vouched_for_is_pinned_and_named_in_ssh_config(tmp_path):
    from kos.ssh import Ssh
    from kos.steps.deployment import ssh_nodes

    known = tmp_path / "known_hosts"
    records = {**host_records(),
               FQDN: {"server_id": "w", "minion_keys": [], "ssh_host_keys": [WORKER_KEY]}}
    outputs = {**OUTPUTS, "minions": {
        "bastion.kos.internal": {"role": "bastion", "hostname": "bastion",
                                 "private_ip": "10.20.0.4"},
        "salt.kos.internal": {"role": "salt_master", "hostname": "salt",
                              "private_ip": "10.20.0.10"},
        FQDN: {"role": "worker", "hostname": "k8s-worker-1", "private_ip": "10.20.0.21"}}}
    dep = deployment(tmp_path, records)
    assert hostkeys.pin_host_keys(dep, outputs) is False
    assert known_hosts_lookup(known, "10.20.0.21") == [WORKER_KEY]
    before = known.read_text()
    hostkeys.pin_host_keys(dep, outputs)
    assert known.read_text() == before  # pinned once
    ssh = Ssh(tmp_path / "state", "192.0.2.10", "10.20.0.10", "debian",
              nodes=ssh_nodes(outputs))
    try:
        # what ssh itself makes of the config kos wrote: the node by its host name, through
        # the bastion, checked strictly against the pinned keys
        out = subprocess.run(["ssh", "-G", "-F", str(ssh.config), "k8s-worker-1"],
                             capture_output=True, text=True, check=True).stdout
        said = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
        assert said["hostname"] == "10.20.0.21" and said["proxyjump"] == "kos-bastion"
        assert said["stricthostkeychecking"] in ("yes", "true")
        assert "Host bastion" not in ssh.config.read_text()
    finally:
        ssh.close()
