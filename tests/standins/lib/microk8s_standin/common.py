"""Paths under KOS_STANDIN_ROOT, the install record and small helpers shared by both CLIs."""

import contextlib
import datetime
import fcntl
import json
import os
import sys
import tempfile

SNAP_NAME = "microk8s"


def root():
    return os.environ.get("KOS_STANDIN_ROOT") or "/"


def rpath(path):
    """Map an absolute path of the simulated node into KOS_STANDIN_ROOT."""
    return os.path.join(root(), path.lstrip("/"))


def install_record_path():
    # Stand-in bookkeeping of what snapd would know (channel, revision, service state).
    return rpath("/var/lib/snapd/kos-standin/microk8s.json")


def system_record_path():
    # What snapd keeps as system options; only refresh.hold (snap refresh --hold without names).
    return rpath("/var/lib/snapd/kos-standin/system.json")


def read_json(path, default=None):
    """The JSON document at path, or default when it is missing or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def load_system():
    return read_json(system_record_path(), {})


def save_system(record):
    write_file(system_record_path(), json.dumps(record, indent=2, sort_keys=True) + "\n")


def load_install():
    return read_json(install_record_path())


def save_install(record):
    write_file(install_record_path(), json.dumps(record, indent=2, sort_keys=True) + "\n")


def snap_data():
    return rpath("/var/snap/microk8s/current")


def snap_data_rev():
    """SNAP_DATA in the revision form that real messages print."""
    rec = load_install()
    if rec:
        return rpath("/var/snap/microk8s/{}".format(rec["revision"]))
    return os.path.realpath(snap_data())


def snap_common():
    return rpath("/var/snap/microk8s/common")


def snap():
    return rpath("/snap/microk8s/current")


def data(*parts):
    return os.path.join(snap_data(), *parts)


def lock(name):
    return data("var", "lock", name)


def expand_snap_vars(text):
    return (
        text.replace("${SNAP_DATA}", snap_data())
        .replace("${SNAP_COMMON}", snap_common())
        .replace("${SNAP}", snap())
    )


def write_file(path, content, mode=None):
    """Atomic write so a concurrently reading agent never sees a half-written file."""
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".kos-tmp-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(content)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_file(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def touch(path, mode=0o600):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "a").close()
    os.chmod(path, mode)


def remove(path):
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


@contextlib.contextmanager
def flocked(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def out(*lines):
    for line in lines:
        sys.stdout.write(line + "\n")
    sys.stdout.flush()


def err(*lines):
    sys.stdout.flush()
    for line in lines:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()


def tabwrite(rows, minwidth, padding):
    """Go text/tabwriter with flags 0: every cell but the last of a row is a padded column."""
    widths = {}
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths.get(i, 0), len(cell))
    lines = []
    for row in rows:
        line = ""
        for i, cell in enumerate(row[:-1]):
            line += cell.ljust(max(widths[i] + padding, minwidth))
        line += row[-1] if row else ""
        lines.append(line)
    return lines


def get_arg(service, name):
    """Value of `name` in $SNAP_DATA/args/<service> (`--x=v` or `--x v`), like GetServiceArgument."""
    text = read_file(data("args", service), "")
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(name + "="):
            return line[len(name) + 1 :].strip().strip('"')
        if line.startswith(name + " "):
            return line[len(name) + 1 :].strip().strip('"')
    return None


def set_arg(service, name, value):
    """Replace/append `name=value` (value None removes it), like join.py/utils.sh set_arg."""
    path = data("args", service)
    lines = read_file(path, "").splitlines()
    kept, done = [], False
    for line in lines:
        if line.startswith(name + "=") or line.startswith(name + " "):
            done = True
            if value is not None:
                kept.append("{}={}".format(name, value))
        else:
            kept.append(line)
    if not done and value is not None:
        kept.append("{}={}".format(name, value))
    write_file(path, "\n".join(kept) + "\n")


# --------------------------------------------------------------------------- Go value formats


def go_quote(text):
    """strconv.Quote for the printable strings that reach error messages."""
    return json.dumps(text, ensure_ascii=False)


_GO_UNITS = {
    "ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6,
    "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9,
}


def parse_go_duration(text):
    """time.ParseDuration: nanoseconds, or ValueError carrying Go's message."""
    invalid = ValueError("time: invalid duration " + go_quote(text))
    s, neg, total = text, False, 0
    if s[:1] in ("-", "+"):
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise invalid
    while s:
        if not (s[0] == "." or "0" <= s[0] <= "9"):
            raise invalid
        i = 0
        v = 0
        while i < len(s) and "0" <= s[i] <= "9":
            v = v * 10 + ord(s[i]) - 48
            if v > 1 << 63:
                raise invalid
            i += 1
        pre, s = i > 0, s[i:]
        frac, scale, post = 0, 1, False
        if s[:1] == ".":
            s = s[1:]
            i = 0
            overflow = False
            while i < len(s) and "0" <= s[i] <= "9":
                if not overflow and frac <= ((1 << 63) - 1 - 9) // 10:
                    frac, scale = frac * 10 + ord(s[i]) - 48, scale * 10
                else:
                    overflow = True
                i += 1
            post, s = i > 0, s[i:]
        if not pre and not post:
            raise invalid
        i = 0
        while i < len(s) and not (s[i] == "." or "0" <= s[i] <= "9"):
            i += 1
        if i == 0:
            raise ValueError("time: missing unit in duration " + go_quote(text))
        unit_name, s = s[:i], s[i:]
        unit = _GO_UNITS.get(unit_name)
        if unit is None:
            raise ValueError("time: unknown unit {} in duration {}".format(go_quote(unit_name), go_quote(text)))
        if v > (1 << 63) // unit:
            raise invalid
        v *= unit
        if frac:
            v += int(frac * (unit / scale))
            if v > 1 << 63:
                raise invalid
        total += v
        if total > 1 << 63:
            raise invalid
    if neg:
        return -total
    if total > (1 << 63) - 1:
        raise invalid
    return total


def rfc3339_local(timestamp):
    """Go's t.Format(time.RFC3339) of a unix time in the local zone (`Z` for a zero offset)."""
    t = datetime.datetime.fromtimestamp(int(timestamp)).astimezone()
    if not t.utcoffset():
        return t.strftime("%Y-%m-%dT%H:%M:%SZ")
    return t.isoformat(timespec="seconds")


def parse_rfc3339(text):
    """Unix time of an RFC 3339 timestamp; None if it is not one."""
    try:
        t = datetime.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except (TypeError, ValueError):
        return None
    if t.tzinfo is None:
        return None
    return t.timestamp()
