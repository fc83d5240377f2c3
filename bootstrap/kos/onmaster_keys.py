"""
``kos.onmaster``'s requests on minion keys: list, wait for, fingerprint, accept and delete
them with Salt's ``WheelClient``. Runs on the salt master (standard library and Salt).
"""

import hashlib
import time

from .onmaster_request import Failure, minion_ids


def key_finger(pem, hash_type="sha256"):
    """
    The fingerprint ``salt-call key.finger`` prints on the minion for this public key: the
    digest of the PEM's lines between its BEGIN and END lines. Computed here because the
    master's own ``key.finger`` hashes a key read from its key cache whole, headers included,
    and so prints another value (saltstack/salt#69970, fixed by #70011).
    """
    lines = [line for line in pem.splitlines(keepends=True) if line.strip()]
    body = "".join(lines[1:-1]).replace("\r\n", "\n")
    digest = hashlib.new(hash_type, body.encode()).hexdigest()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


class Keys:
    """The key requests of ``kos.onmaster.Server``, which gives ``wheel``, ``local``, ``salt``,
    ``opts``, ``out`` and ``check_cancelled``."""

    def op_keys(self, rid, req):
        return self.key_lists()

    def key_lists(self):
        ret = self.wheel.cmd("key.list_all", print_event=False)
        return {
            name: sorted(ret.get(name) or [])
            for name in ("minions", "minions_pre", "minions_rejected", "minions_denied")
        }

    def op_delete_keys(self, rid, req):
        """
        Forget these minions (nodes whose servers Terraform destroyed): their keys in every
        state, and what the master keeps of them (mine, grains, pillar). Minions that have
        no key are reported, not an error: a re-run after a partial delete finishes it.
        """
        wanted = minion_ids(req.get("minions"))
        present = set().union(*self.key_lists().values())
        todo = sorted(set(wanted) & present)
        if todo:
            self.wheel.cmd("key.delete", kwarg={"match": todo}, print_event=False)
        cache = self.salt.cache.factory(self.opts)
        for mid in wanted:
            # key.delete flushes the grains and pillar banks only; the mine is kept per id
            cache.flush("mine", mid)
        # A rebuilt node's minion presents its new key again within seconds of the delete
        # (acceptance_wait_time), and with no accepted key left for its id the master files
        # it as pending; only a key in another state can be one the delete missed.
        after = self.key_lists()
        kept = ("minions", "minions_rejected", "minions_denied")
        left = sorted(set().union(*(after[s] for s in kept)) & set(todo))
        if left:
            raise Failure("keys", f"the keys of {', '.join(left)} are still there after key.delete")
        return {
            "deleted": todo,
            "had_no_key": sorted(set(wanted) - present),
            "presented_again": sorted(set(after["minions_pre"]) & set(todo)),
        }

    def op_wait_keys(self, rid, req):
        """Until every listed minion has presented a key (in any state), or the timeout."""
        wanted = minion_ids(req.get("minions"))
        deadline = time.monotonic() + float(req.get("timeout", 900))
        events = self.salt.utils.event.get_master_event(
            self.opts, self.opts["sock_dir"], listen=True
        )
        try:
            said = None
            while True:
                keys = self.key_lists()
                present = set().union(*keys.values())
                missing = sorted(set(wanted) - present)
                if not missing or time.monotonic() > deadline:
                    return dict(keys, missing=missing)
                if missing != said:
                    self.out.emit(
                        id=rid, event="progress", message="waiting for keys", missing=missing
                    )
                    said = missing
                # A minion presenting its key fires salt/auth; re-list then, or every few s.
                until = time.monotonic() + 5
                while time.monotonic() < until:
                    self.check_cancelled()
                    ev = events.get_event(wait=1, full=True, auto_reconnect=True)
                    if ev and str(ev.get("tag", "")).startswith(("salt/auth", "salt/key")):
                        break
        finally:
            events.destroy()

    def key_fingers(self, minions):
        """``{"minions_pre": {id: fingerprint}, "minions": {...}}`` of these minions' keys."""
        ret = self.wheel.cmd("key.print", kwarg={"match": list(minions)}, print_event=False)
        return {
            status: {
                mid: key_finger(pem)
                for mid, pem in ((ret or {}).get(status) or {}).items()
                if mid in minions and isinstance(pem, str)
            }
            for status in ("minions_pre", "minions")
        }

    def op_fingers(self, rid, req):
        """The fingerprints of these minions' pending and accepted keys."""
        found = self.key_fingers(minion_ids(req.get("minions")))
        return {"pending": found["minions_pre"], "accepted": found["minions"]}

    def op_accept(self, rid, req):
        """
        Accept exactly these pending keys, each only while its fingerprint is the one given
        (``fingers``: {id: fingerprint}), never a rejected or denied one. A key that differs
        is left pending; one that changed while it was being accepted is rejected.
        """
        fingers = req.get("fingers")
        if not isinstance(fingers, dict):
            raise Failure("invalid", f"accept needs fingers {{id: fingerprint}}: {fingers!r}")
        wanted = minion_ids(sorted(fingers))
        pending = self.key_fingers(wanted)["minions_pre"]
        refused = {m: pending[m] for m in wanted if m in pending and pending[m] != fingers[m]}
        todo = sorted(m for m in wanted if m in pending and m not in refused)
        if todo:
            self.wheel.cmd(
                "key.accept",
                kwarg={"match": todo, "include_rejected": False, "include_denied": False},
                print_event=False,
            )
        accepted = self.key_fingers(todo)["minions"] if todo else {}
        swapped = sorted(m for m in todo if m in accepted and accepted[m] != fingers[m])
        for mid in swapped:
            self.wheel.cmd(
                "key.reject", kwarg={"match": mid, "include_accepted": True}, print_event=False
            )
            refused[mid] = accepted[mid]
        return {
            "accepted": [m for m in todo if m in accepted and m not in swapped],
            "not_pending": sorted(set(wanted) - set(pending)),
            "refused": refused,
        }
