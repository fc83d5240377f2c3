"""
What every request of ``kos.onmaster``'s program shares: how it fails and how it reads minion
ids. Runs on the salt master (standard library only).
"""

import re

MINION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class Failure(Exception):
    """A request that failed: ``kind`` and ``message`` (and ``extra``) make its error event."""

    def __init__(self, kind, message, **extra):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.extra = extra


def minion_ids(value):
    """``value`` as a non-empty list of minion ids; ``Failure`` when it is not one."""
    ids = [str(v) for v in (value or [])]
    bad = [v for v in ids if not MINION_ID.match(v)]
    if bad or not ids:
        raise Failure("invalid", f"not a list of minion ids: {value!r}")
    return ids
