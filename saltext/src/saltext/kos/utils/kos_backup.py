"""
Sealing a datastore backup for the salt master, which keeps it and serves it back through
its file server to the control plane that restores it. A backup holds every Secret of
the cluster, and the master's file server answers any minion that asks: so the backup
leaves the control plane sealed (AES-256-GCM) with a key derived from a private key only
the control planes hold (kubeadm's etcd CA key, microk8s' cluster CA key), and only a
control plane can open it. Neither the master nor a worker can read one.

The format: ``KOSBAK1\\n``, a 12-byte nonce, the ciphertext, the 16-byte GCM tag. Both
ways stream (a snapshot may be large) and write through a temporary file, renamed into
place only once complete (and, when opening, authenticated).
"""

import hashlib
import hmac
import os
import tempfile
import time

from salt.exceptions import CommandExecutionError

try:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    HAS_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - Salt's own packages ship it
    HAS_CRYPTOGRAPHY = False

# A sealed backup's file name: <what>-<node>-<UTC time>.kosbak.
SUFFIX = ".kosbak"
MAGIC = b"KOSBAK1\n"
NONCE = 12
TAG = 16
CHUNK = 1 << 20
CONTEXT = b"kos backup sealing key v1"


def _key(key_file):
    try:
        with open(key_file, "rb") as fh:
            secret = fh.read()
    except OSError as exc:
        raise CommandExecutionError(
            f"cannot read {key_file} to seal or open a backup (only a control plane can): "
            f"{exc.strerror}") from exc
    return hmac.new(secret, CONTEXT, hashlib.sha256).digest()


def _write_atomically(dest, produce):
    directory = os.path.dirname(os.path.abspath(dest))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".kos-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            produce(out)
        os.chmod(tmp, 0o600)
        os.replace(tmp, dest)
    except BaseException:
        os.unlink(tmp)
        raise


def seal(src, dest, key_file):
    """Write ``src`` sealed to ``dest`` (mode 0600); return ``dest``."""
    if not HAS_CRYPTOGRAPHY:
        raise CommandExecutionError("sealing a backup needs the cryptography package")
    key = _key(key_file)
    nonce = os.urandom(NONCE)
    enc = Cipher(algorithms.AES(key), modes.GCM(nonce)).encryptor()

    def produce(out):
        out.write(MAGIC + nonce)
        with open(src, "rb") as fh:
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                out.write(enc.update(chunk))
        out.write(enc.finalize() + enc.tag)

    _write_atomically(dest, produce)
    return dest


def open_sealed(src, dest, key_file):
    """Write the backup sealed in ``src`` to ``dest`` (mode 0600); return ``dest``. A file
    that is not a sealed backup, was changed, or was sealed by another cluster is refused
    and ``dest`` is left as it was."""
    if not HAS_CRYPTOGRAPHY:
        raise CommandExecutionError("opening a backup needs the cryptography package")
    key = _key(key_file)
    size = os.path.getsize(src)
    with open(src, "rb") as fh:
        head = fh.read(len(MAGIC) + NONCE)
        if len(head) < len(MAGIC) + NONCE or not head.startswith(MAGIC) \
                or size < len(head) + TAG:
            raise CommandExecutionError(f"{src} is not a backup sealed by kos")
        fh.seek(size - TAG)
        tag = fh.read(TAG)
    dec = Cipher(algorithms.AES(key), modes.GCM(head[len(MAGIC):], tag)).decryptor()

    def produce(out):
        with open(src, "rb") as fh:
            fh.seek(len(head))
            left = size - len(head) - TAG
            while left:
                chunk = fh.read(min(CHUNK, left))
                left -= len(chunk)
                out.write(dec.update(chunk))
        try:
            out.write(dec.finalize())
        except InvalidTag as exc:
            raise CommandExecutionError(
                f"{src} does not open with this cluster's key: it was changed, or sealed "
                "by another cluster") from exc

    _write_atomically(dest, produce)
    return dest


def stamp():
    """The UTC time that ends a backup's name (and sorts them)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def sealed_name(name):
    return name + SUFFIX


def unsealed_name(sealed):
    """A sealed backup's name without the suffix: what it was taken as."""
    name = os.path.basename(sealed)
    return name[:-len(SUFFIX)] if name.endswith(SUFFIX) else name


def is_sealed(name):
    return name.endswith(SUFFIX)


def oldest_first(names):
    """Sealed backups' names, oldest first: by the UTC time that ends each name."""
    return sorted((n for n in names if n.endswith(SUFFIX)), key=lambda n: (n.rsplit("-", 1)[-1], n))


def fetch_opened(salt, source, dest, key_file, saltenv="kos-backups"):
    """
    Fetch the sealed backup ``source`` (``salt://<name>``) from the master's file server
    (``saltenv``) beside ``dest``, open it into ``dest`` with ``key_file`` and remove the
    sealed copy; return ``dest``. The caller hands in its ``__salt__``.
    """
    sealed = dest + SUFFIX
    try:
        if not salt["cp.get_file"](source, sealed, saltenv=saltenv):
            raise CommandExecutionError(
                f"the salt master serves no backup {source} (saltenv {saltenv}; a master "
                "configured before backups serves none: kos converge configures it)")
        return open_sealed(sealed, dest, key_file)
    finally:
        if os.path.exists(sealed):
            os.unlink(sealed)
