"""
The SSH host keys kos trusts: the bastion's and the salt master's pinned into the state
directory's known_hosts before the first connection, from ``--known-hosts`` or else from
what the servers' consoles printed at first boot (``kos.trust``); every other server's
pinned the same way when its console showed them; a rebuilt server's old keys forgotten.
"""

import shutil
import subprocess

from .. import trust, ui
from ..errors import ConvergeError

# (role in the outputs' minions, what to call it, the output holding its SSH address)
SSH_HOSTS = (
    ("bastion", "bastion", "bastion_floating_ip"),
    ("salt_master", "salt master", "salt_master_private_ip"),
)


def console_reader(dep, name):
    """The backend's reader of consoles ``name``, or None where no cloud can be read
    (``--outputs`` runs, a cloud without consoles)."""
    if dep.settings.outputs_file:
        return None
    return getattr(dep.backend, name, None)


def console_records(dep, needed=()):
    """
    What the servers' consoles printed (``kos.trust`` records by minion id), as recorded
    at first boot; read afresh from the cloud when one of ``needed`` has no record and the
    backend can read consoles (not for ``--outputs`` runs, which have no cloud).
    """
    store = trust.Consoles(dep.state.path)
    records = store.load()
    if not [m for m in needed if not trust.has_marks(records.get(m))]:
        return records
    reader = console_reader(dep, "read_consoles")
    if reader is None or dep.consoles_read:
        return records
    dep.consoles_read = True
    try:
        fresh = reader()
    except Exception as exc:  # noqa: BLE001 - the decisions that follow name what is missing
        ui.warn(f"could not read the servers' consoles: {exc}")
        return records
    return store.update(fresh)



def pin_host_keys(dep, outputs):
    """
    Before the first SSH connection: the bastion's and the master's host keys into the
    state directory's known_hosts, from ``--known-hosts`` or else from their consoles.
    ``True`` when one is still unknown and the operator accepts it on first use.
    """
    known = dep.state.path / "known_hosts"
    if dep.settings.known_hosts:
        shutil.copyfile(dep.settings.known_hosts, known)
        return False
    by_role = {info.get("role"): mid for mid, info in outputs["minions"].items()}
    hosts = [
        (name, by_role.get(role), trust.known_hosts_host(outputs[address], dep.settings.ssh_port))
        for role, name, address in SSH_HOSTS
    ]
    records = console_records(
        dep, [mid for _, mid, host in hosts if mid and not trust.pinned(known, host)]
    )
    unknown = []
    for name, mid, host in hosts:
        keys = (records.get(mid) or {}).get("ssh_host_keys")
        if keys:
            if not trust.pinned_as(known, host, keys):
                trust.pin(known, host, keys)
        elif not trust.pinned(known, host):
            unknown.append(f"the {name} ({host})")
    # every other server its console vouched for, so that ssh -F <state dir>/ssh_config
    # reaches any node as strictly as kos reaches the master
    pinned = {mid for _, mid, _ in hosts}
    for mid, info in (outputs.get("minions") or {}).items():
        keys = (records.get(mid) or {}).get("ssh_host_keys")
        if mid in pinned or not keys or not info.get("private_ip"):
            continue
        host = trust.known_hosts_host(info["private_ip"], dep.settings.ssh_port)
        if not trust.pinned_as(known, host, keys):
            trust.pin(known, host, keys)
    if not unknown:
        return False
    if not dep.settings.trust_unverified:
        raise ConvergeError(
            f"no verified SSH host key for {' and '.join(unknown)}: no console showed one "
            f"and none is pinned in {known}",
            fix="run kos up with the cloud's credentials so kos reads the keys from the "
            "servers' consoles (the console-log API), or pass --known-hosts FILE with the keys "
            "the consoles show, or accept them on first use with " + trust.UNVERIFIED_FLAG,
        )
    ui.warn(
        f"trusting the SSH host key of {' and '.join(unknown)} on first use "
        f"({trust.UNVERIFIED_FLAG})"
    )
    return True


def pin_node_host_key(dep, minion, address):
    """
    A node kos reaches over SSH through the bastion (``kos kubeconfig``): its host keys
    from its console into known_hosts, pinned as the bastion's and the master's are.
    """
    if dep.settings.known_hosts:
        return
    known = dep.state.path / "known_hosts"
    host = trust.known_hosts_host(address, dep.settings.ssh_port)
    keys = (console_records(dep, [minion]).get(minion) or {}).get("ssh_host_keys")
    if keys:
        trust.pin(known, host, keys)
    elif not (trust.pinned(known, host) or dep.settings.trust_unverified):
        raise ConvergeError(
            f"no verified SSH host key for {minion} ({host}): no console showed one and none "
            f"is pinned in {known}",
            fix="run kos with the cloud's credentials so kos reads the keys from the servers' "
            "consoles, or pass --known-hosts FILE with its key, or accept it on first use with "
            + trust.UNVERIFIED_FLAG,
        )



def forget_host_keys(dep, hostnames):
    """A rebuilt host has new SSH host keys: drop the pinned old ones (the bastion and the
    master's, and a first control plane's, which `kos kubeconfig` reaches)."""
    outputs = dep.outputs()
    addresses = {m.get("hostname"): m.get("private_ip")
                 for m in (outputs.get("minions") or {}).values()}
    addresses.update(bastion=outputs.get("bastion_floating_ip"),
                     salt=outputs.get("salt_master_private_ip"))
    known = dep.state.path / "known_hosts"
    port = dep.settings.ssh_port
    for name in hostnames:
        address = addresses.get(name)
        if address and known.exists():
            host = address if port == 22 else f"[{address}]:{port}"
            subprocess.run(["ssh-keygen", "-R", host, "-f", str(known)], capture_output=True)
            ui.info(f"{name} was rebuilt: its old SSH host key is forgotten ({host})")

