"""
The run lock: one kos run per cluster, locally (the state directory's ``lock``) and on the
salt master (``kos.onmaster`` holds it there for as long as its session lives).

Only the standard library: ``kos.channel.Channel`` sends this file to the master ahead of
the ``onmaster`` modules, where kos is not installed.
"""

import fcntl
import json
import os


class LockHeld(Exception):
    """Someone holds the lock; ``holder`` is what they wrote in it (may be empty)."""

    def __init__(self, holder):
        super().__init__(holder)
        self.holder = holder


def _read_holder(fd):
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 65536).decode("utf-8", "replace")
        holder = json.loads(text) if text.strip() else {}
        return holder if isinstance(holder, dict) else {}
    except (OSError, ValueError):
        return {}


class FileLock:
    """
    An exclusive ``flock`` on ``path``; the file names its holder (a JSON object). The kernel
    drops a flock when its process dies, so a file whose lock nobody holds is what a dead run
    left behind: ``acquire`` takes it over and returns what it said. The file is removed on
    release, and the inode is checked after locking so a run that locked a file another run
    just removed tries again.
    """

    def __init__(self, path):
        self.path = path
        self.fd = None

    def acquire(self, holder, wait=False):
        """Lock and write ``holder``; return the holder of a stale lock (or None). Held by
        someone else: ``LockHeld``, or with ``wait`` until they release it."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                found = _read_holder(fd)
                os.close(fd)
                raise LockHeld(found) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        stale = _read_holder(fd)
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, json.dumps(holder, sort_keys=True).encode())
        os.fsync(fd)
        self.fd = fd
        return stale or None

    def release(self):
        if self.fd is None:
            return
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = None
