"""
The salt master's batch guard (``engines: [kos_batch_scrub]``): no secret rests in a
batch's ``.batch.p``.

Salt 3008 keeps the state of every batch in ``<cachedir>/jobs/<jid dir>/.batch.p``,
written by the master's batch manager from the ``salt/batch/<jid>/...`` events, and that
state holds every minion's whole return. The master's job cache (kos_job_cache) never
sees that file, and every ``salt --static`` (``--out=json --static`` is how one reads a
return as a document) and ``salt -b`` runs as a batch, so an operator's
``salt --static <node> mine.get ...`` would leave a join credential there until the job
is cleaned. This engine rewrites each such file, shortly after the batch manager wrote
it, through kos_job_cache's own rules (``kos_job_cache.redact_batch``), and sweeps the
jobs directory for any it missed (a file written while the master restarted).
"""

import glob
import logging
import os
import re
import time

import salt.loader
import salt.payload
import salt.utils.atomicfile
import salt.utils.event
import salt.utils.jid

log = logging.getLogger(__name__)

__virtualname__ = "kos_batch_scrub"

# The events after which the batch manager writes .batch.p (salt/utils/batch_manager.py).
LIFECYCLE = re.compile(r"^salt/batch/(\d+)/(?:new|progress|complete|halted)$")


def __virtual__():
    return __virtualname__


def scrub(path, redact):
    """Rewrite one ``.batch.p`` without its secrets; whether it held any."""
    try:
        with open(path, "rb") as fp:
            state = salt.payload.loads(fp.read())
    except FileNotFoundError:
        return False
    if not isinstance(state, dict):
        return False
    safe = redact(state)
    if safe == state:
        return False
    with salt.utils.atomicfile.atomic_open(path, "wb") as fp:
        fp.write(salt.payload.dumps(safe))
    return True


def sweep(jobs, redact, since=0.0):
    """Scrub every ``.batch.p`` under ``jobs`` changed since ``since`` (a time.time())."""
    scrubbed = 0
    for path in glob.glob(os.path.join(glob.escape(jobs), "*", "*", ".batch.p")):
        try:
            changed = os.stat(path).st_mtime >= since
        except FileNotFoundError:
            continue
        if changed and scrub(path, redact):
            scrubbed += 1
    return scrubbed


def start(delay=1.0, sweep_interval=10.0):
    """
    ``delay``: seconds after a batch event before its file is read (the batch manager
    writes it on the same event, in its own process). ``sweep_interval``: seconds between
    sweeps of the files changed since the last one.
    """
    opts = __opts__
    jobs = os.path.join(opts["cachedir"], "jobs")
    hash_type = opts.get("hash_type", "sha256")
    redact = salt.loader.returners(opts, {}, whitelist=["kos_job_cache"])[
        "kos_job_cache.redact_batch"
    ]
    swept = time.time()
    sweep(jobs, redact)
    due = {}
    with salt.utils.event.get_master_event(opts, opts["sock_dir"], listen=True) as bus:
        while True:
            event = bus.get_event(wait=0.5, full=True)
            if event:
                match = LIFECYCLE.match(str(event.get("tag", "")))
                if match:
                    path = os.path.join(
                        salt.utils.jid.jid_dir(match.group(1), jobs, hash_type), ".batch.p"
                    )
                    due[path] = time.monotonic() + float(delay)
            now = time.monotonic()
            for path, at in list(due.items()):
                if at <= now:
                    del due[path]
                    try:
                        scrub(path, redact)
                    except Exception:  # pylint: disable=broad-except
                        log.exception("kos_batch_scrub: could not scrub %s", path)
            if time.time() - swept >= float(sweep_interval):
                # files changed since just before the last sweep began
                since, swept = swept - 1, time.time()
                try:
                    sweep(jobs, redact, since)
                except Exception:  # pylint: disable=broad-except
                    log.exception("kos_batch_scrub: the sweep of %s failed", jobs)
