"""
Verified trust: what each server printed on its console at first boot, and what kos
decides from it.

The first boot script (terraform/cloud-init/kos-firstboot.sh.tftpl) prints, just before
its "first boot done" line::

    kos-trust: <minion id> ssh-host-key <type> <base64 key>      one per host key
    kos-trust: <minion id> salt-minion-key sha256 <aa:bb:...>   salt-call key.finger

kos reads every server's console through the cloud's console-log API (``kos.cloud``),
keeps these public values in the state directory (``trust.json``), and then:

* accepts a pending minion key only when its fingerprint is the one the console printed;
  a different key is refused and left pending, whatever the options;
* pins the bastion's and the master's SSH host keys into the state directory's
  ``known_hosts`` before the first SSH connection, which then checks them strictly.

A console is the cloud's word about the machine: only the hypervisor and root on the host
write to it, so a machine that merely reaches the master's ports cannot forge it. Where no
console could be read (a cloud without the console-log API, ``--outputs`` runs), nothing
is trusted on first use unless the operator says so (``--trust-unverified``).

cloud-init's own "-----BEGIN SSH HOST KEY KEYS-----" block (its keys_to_console module) is
read too, as a second source of host keys.
"""

import base64
import json
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import ConvergeError

TRUST_FILE = "trust.json"
HASH = "sha256"
# The boot script's output reaches a console through journald, as
# "[   12.34] cloud-init[130]: kos-trust: ...": a mark starts its line or follows exactly
# that prefix (never other text: something echoed by another program is no evidence).
MARK = re.compile(
    r"^\s*(?:\[\s*\d+\.\d+\]\s*)?(?:cloud-init\[\d+\]:\s*)?"
    r"kos-trust: (?P<id>\S+) (?P<kind>salt-minion-key|ssh-host-key) (?P<a>\S+) (?P<b>\S+)\s*$"
)
# The console's getty prints "<host> login: " without a newline whenever it starts, so the
# next line written to the console, whoever writes it, follows the prompt on the same line.
LOGIN_PROMPT = re.compile(r"^(?:\S+ login: )+")
FINGER = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){31}$")
CLOUD_INIT_BEGIN = "-----BEGIN SSH HOST KEY KEYS-----"
CLOUD_INIT_END = "-----END SSH HOST KEY KEYS-----"
HOST_KEY_TYPES = re.compile(r"^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521))$")
UNVERIFIED_FLAG = "--trust-unverified (KOS_TRUST_UNVERIFIED=1)"


def host_key(kind, blob):
    """``"<type> <base64>"`` when ``blob`` is a well-formed SSH public key of ``kind``."""
    if not HOST_KEY_TYPES.match(kind):
        return None
    try:
        raw = base64.b64decode(blob, validate=True)
    except ValueError:
        return None
    # The wire format starts with the key type, length-prefixed.
    size = int.from_bytes(raw[:4], "big") if len(raw) > 4 else 0
    if raw[4 : 4 + size] != kind.encode():
        return None
    return f"{kind} {blob}"


def parse_console(text, minion_id):
    """
    What a console says about ``minion_id``: ``{"minion_keys": [fingerprints],
    "ssh_host_keys": ["<type> <base64>", ...]}``. Lines naming another minion are ignored
    (a console speaks for its own server only). Two different fingerprints are both kept:
    such a console verifies nothing.
    """
    fingers, keys = [], []
    in_block = False
    for raw in text.replace("\r", "").splitlines():
        line = LOGIN_PROMPT.sub("", raw.strip())
        if line == CLOUD_INIT_BEGIN:
            in_block = True
            continue
        if line == CLOUD_INIT_END:
            in_block = False
            continue
        if in_block:
            fields = line.split()
            key = host_key(fields[0], fields[1]) if len(fields) >= 2 else None
            if key and key not in keys:
                keys.append(key)
            continue
        match = MARK.match(line)
        if not match or match["id"] != minion_id:
            continue
        if match["kind"] == "salt-minion-key":
            finger = match["b"].lower()
            if match["a"] == HASH and FINGER.match(finger) and finger not in fingers:
                fingers.append(finger)
        else:
            key = host_key(match["a"], match["b"])
            if key and key not in keys:
                keys.append(key)
    return {"minion_keys": fingers, "ssh_host_keys": sorted(keys)}


def has_marks(record):
    return bool(record and (record.get("minion_keys") or record.get("ssh_host_keys")))


# -- the record in the state directory ------------------------------------------------------


class Consoles:
    """``<state dir>/trust.json``: per minion id, what its server's console printed."""

    def __init__(self, state_dir):
        self.path = Path(state_dir) / TRUST_FILE

    def load(self):
        try:
            doc = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise ConvergeError(
                f"{self.path} is unreadable: {exc}",
                fix="delete it and re-run kos up, which reads the servers' consoles again",
            ) from exc
        return doc.get("minions", {})

    def first_booted(self):
        """IDs of the servers whose first boot printed their marks on a console kos read."""
        return {r["server_id"] for r in self.load().values()
                if r.get("server_id") and has_marks(r)}

    def update(self, records):
        """
        Merge fresh readings. A reading of the same server that shows no marks (its console
        scrolled past them) keeps what was read before; a new server replaces the record.
        """
        known = self.load()
        for mid, record in records.items():
            old = known.get(mid)
            same = old and old.get("server_id") == record.get("server_id")
            if same and not has_marks(record):
                continue
            known[mid] = dict(record, read=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"minions": known}, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.path)
        return known


# -- minion keys ----------------------------------------------------------------------------


@dataclass
class Verdict:
    minion: str
    accept: bool
    verified: bool
    presented: str
    console: list
    problem: str = ""
    fix: str = ""


def judge(minion, presented, record, trust_unverified=False):
    """Whether the pending key of ``minion`` (fingerprint ``presented``) may be accepted."""
    console = list((record or {}).get("minion_keys") or [])
    server = (record or {}).get("server") or minion.split(".")[0]
    if len(console) == 1 and console[0] == presented:
        return Verdict(minion, True, True, presented, console)
    if not console and trust_unverified:
        return Verdict(minion, True, False, presented, console)

    def refuse(verified, problem, fix):
        return Verdict(minion, False, verified, presented, console, problem, fix)

    if len(console) == 1:
        return refuse(
            True,
            f"{minion}: the master received a key with fingerprint {HASH} {presented}, "
            f"but the server's console printed {HASH} {console[0]} at first boot",
            f"another machine may be using the minion id {minion}: find it and stop its "
            f"salt-minion, delete the pending key on the master (salt-key -d {minion}), then "
            f"re-run kos converge; if {server} was rebuilt outside kos, delete its entry from "
            f"the state directory's {TRUST_FILE} so that kos converge reads its new console",
        )
    if len(console) > 1:
        return refuse(
            True,
            f"{minion}: its console printed {len(console)} different minion key "
            f"fingerprints ({', '.join(console)}); the key the master received ({HASH} "
            f"{presented}) cannot be verified",
            f"read the console (openstack console log show {server}); rebuild the server "
            f"(kos up --replace {server.split('.')[0]}) if you cannot explain it",
        )
    return refuse(
        False,
        f"{minion}: no minion key fingerprint was read from its console, so its key "
        f"({HASH} {presented}) cannot be verified",
        f"let kos read the server's console (the cloud's console-log API) and re-run kos "
        f"converge; or compare {presented} with `salt-call --local key.finger "
        f"hash_type={HASH}` run on {minion} itself and, if they match, re-run with "
        f"{UNVERIFIED_FLAG}",
    )


def refusal(verdicts):
    """One ConvergeError for the refused keys, each named with both fingerprints."""
    refused = [v for v in verdicts if not v.accept]
    if len(refused) == 1:
        problem = f"refused the salt key of {refused[0].problem}; it is left unaccepted (pending)"
        details = []
    else:
        problem = (
            f"refused the salt keys of {', '.join(v.minion for v in refused)}; they are left "
            "unaccepted (pending)"
        )
        details = [v.problem for v in refused]
    return ConvergeError(problem, fix="; ".join(dict.fromkeys(v.fix for v in refused)),
                         details=details)


# -- SSH host keys --------------------------------------------------------------------------


def known_hosts_host(address, port):
    return address if int(port) == 22 else f"[{address}]:{port}"


def pinned(known_hosts, host):
    """Whether ``known_hosts`` has a key for ``host`` (hashed entries included)."""
    if not Path(known_hosts).exists():
        return False
    res = subprocess.run(
        ["ssh-keygen", "-F", host, "-f", str(known_hosts)], capture_output=True, text=True
    )
    return res.returncode == 0 and bool(res.stdout.strip())


def pinned_as(known_hosts, host, keys):
    """Whether ``known_hosts`` holds exactly ``keys`` for ``host``."""
    path = Path(known_hosts)
    lines = path.read_text().splitlines() if path.exists() else []
    have = {line for line in lines if line.split(" ", 1)[0] == host}
    return have == {f"{host} {key}" for key in keys}


def pin(known_hosts, host, keys):
    """Make ``known_hosts`` hold exactly ``keys`` for ``host`` (other hosts are kept)."""
    path = Path(known_hosts)
    if path.exists():
        subprocess.run(["ssh-keygen", "-R", host, "-f", str(path)], capture_output=True)
        Path(f"{path}.old").unlink(missing_ok=True)
    lines = path.read_text().splitlines() if path.exists() else []
    lines += [f"{host} {key}" for key in keys]
    path.write_text("".join(line + "\n" for line in lines if line.strip()))
