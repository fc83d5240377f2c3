"""`snap` stand-in: install/refresh/remove/list/start/stop/restart of the microk8s snap, as
https://github.com/canonical/snapd/tree/master/cmd/snap does them.

Refresh holds (snapd >= 2.58, https://snapcraft.io/docs/managing-updates):
`snap refresh --hold[=DURATION] [microk8s]` and
`snap refresh --unhold [microk8s]`.  A per-snap ("general") hold is kept in the install record
as ``"hold": "forever"`` or an RFC 3339 expiry; while it is in effect `snap list` adds `held` to
the Notes (`classic,held`, snapd notes.go).  A hold without snap names (auto-refresh of all
snaps) is kept as ``"refresh.hold"`` in $ROOT/var/lib/snapd/kos-standin/system.json.  An explicit
`snap refresh microk8s --channel=...` still refreshes a held snap and keeps the hold.
"""

import os
import shutil
import sys
import time

from . import agent, catalog, common, layout
from . import mkcommon as mk

SCRIPT_NAMES = (
    "microk8s", "microk8s.kubectl", "microk8s.status", "microk8s.enable", "microk8s.disable",
    "microk8s.add-node", "microk8s.join", "microk8s.leave", "microk8s.remove-node",
    "microk8s.config", "microk8s.refresh-certs", "microk8s.start", "microk8s.stop",
    "microk8s.version",
)


class FlagError(Exception):
    pass


class SnapError(Exception):
    def __init__(self, msg, code=1):
        super().__init__(msg)
        self.code = code


def unicode_ok():
    # SNAPD color.go canUnicode: only a terminal with a UTF-8 locale gets the ✓ badge.
    if not sys.stdout.isatty():
        return False
    for var in ("LC_ALL", "LC_MESSAGES", "LANG"):
        val = os.environ.get(var)
        if val:
            return "utf-8" in val.lower() or "utf8" in val.lower()
    return False


def badge():
    return "✓" if unicode_ok() else "**"


def fill(msg, indent=7):
    """error.go fill(): wrap to the terminal width (80 when not a terminal), indent follow lines.
    Greedy wrapping; newer Go doc printers may break lines slightly differently."""
    try:
        width = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        width = 0
    if sys.stdout.isatty() and width <= 0:
        width = shutil.get_terminal_size((80, 25)).columns
    if width < 40:
        width = 80
    width = min(width, 100) - 1 - indent
    pad = " " * indent
    out_lines = []
    for pi, para in enumerate(msg.strip().split("\n\n")):
        if pi:
            out_lines.append("")
        line = ""
        for word in para.split():
            if line and len(line) + 1 + len(word) > width:
                out_lines.append(line)
                line = word
            else:
                line = word if not line else line + " " + word
        out_lines.append(line)
    return "\n".join(out_lines[:1] + [pad + line if line else "" for line in out_lines[1:]])


def parse_flags(args, value_flags, bool_flags, optional_flags=None):
    """go-flags: `optional_flags` maps a flag to the value it takes when given without `=`
    (such a flag never consumes the next argument)."""
    optional_flags = optional_flags or {}
    opts, names = {}, []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            names.extend(args[i + 1 :])
            break
        if a.startswith("--"):
            key, eq, val = a[2:].partition("=")
            if key in optional_flags:
                opts[key] = val if eq else optional_flags[key]
            elif key in value_flags:
                if not eq:
                    i += 1
                    if i >= len(args):
                        raise FlagError("expected argument for flag `--{}'".format(key))
                    val = args[i]
                opts[key] = val
            elif key in bool_flags and not eq:
                opts[key] = True
            else:
                raise FlagError("unknown flag `{}'".format(key))
        elif a.startswith("-") and len(a) > 1:
            raise FlagError("unknown flag `{}'".format(a[1:]))
        else:
            names.append(a)
        i += 1
    return opts, names


def parse_channel(text):
    """snap/channel: returns (track, risk, branch)."""
    parts = text.split("/")
    if len(parts) == 1:
        return ("latest", parts[0], "") if parts[0] in catalog.RISKS else (parts[0], "stable", "")
    if len(parts) == 2:
        if parts[0] in catalog.RISKS:
            return "latest", parts[0], parts[1]
        return parts[0], parts[1], ""
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    raise SnapError('channel name has too many components: "{}"'.format(text))


def channel_full(track, risk, branch):
    return "/".join(p for p in (track, risk, branch) if p)


def channel_clean(track, risk, branch):
    return "/".join(p for p in (None if track == "latest" else track, risk, branch) if p)


def requested_channel(opts):
    if "channel" in opts:
        return opts["channel"]
    for risk in catalog.RISKS:
        if opts.get(risk):
            return risk
    return "latest/stable"


def resolve(channel_text):
    track, risk, branch = parse_channel(channel_text)
    if risk not in catalog.RISKS:
        raise SnapError("invalid risk in channel name: {}".format(risk))
    minor = catalog.track_minor(track)
    if minor not in catalog.TRACKS or branch:
        raise SnapError(
            'snap "microk8s" not available on channel "{}" (see \'snap info microk8s\')'.format(
                channel_full(track, risk, branch)
            )
        )
    version, rev = catalog.TRACKS[minor]
    return {
        "track": track,
        "risk": risk,
        "channel": channel_full(track, risk, branch),
        "version": version,
        "revision": rev,
    }


def done_line(rec, action):
    clean = channel_clean(rec["track"], rec["risk"], "")
    chan = "" if clean == "stable" else " ({})".format(clean)
    return "microk8s{} {} from Canonical{} {}".format(chan, rec["version"], badge(), action)


def link_apps():
    bindir = common.rpath("/snap/bin")
    os.makedirs(bindir, exist_ok=True)
    target = os.path.realpath(agent.SCRIPT)
    for name in SCRIPT_NAMES:
        path = os.path.join(bindir, name)
        common.remove(path)
        os.symlink(target, path)


def _only_microk8s(names, verb):
    if not names:
        raise SnapError("the required argument `<snap> (at least 1 argument)` was not provided", 1)
    for name in names:
        if name != common.SNAP_NAME:
            raise SnapError('snap "{}" not found'.format(name))


def cmd_install(args):
    opts, names = parse_flags(
        args,
        {"channel", "revision", "cohort", "name"},
        {"classic", "devmode", "jailmode", "dangerous", "unaliased", "prefer", "no-wait", *catalog.RISKS},
    )
    _only_microk8s(names, "install")
    if common.load_install():
        common.err('snap "microk8s" is already installed, see \'snap help refresh\'')
        return 0
    rec = resolve(requested_channel(opts))
    if not opts.get("classic") and not opts.get("devmode"):
        msg = (
            'This revision of snap "microk8s" was published using classic confinement and thus may '
            "perform arbitrary system changes outside of the security sandbox that snaps are usually "
            "confined to, which may put your system at risk.\n\n"
            "If you understand and want to proceed repeat the command including --classic."
        )
        raise SnapError(fill(msg))
    rec["services_active"] = True
    layout.create_snap_dir(rec["revision"], rec["track"])
    common.save_install(rec)
    layout.create_data_dir(rec["revision"], rec["track"], rec["version"])
    link_apps()
    agent.start_agent()
    common.out(done_line(rec, "installed"))
    return 0


def hold_in_effect(value, now=None):
    """A hold recorded as "forever" or an RFC 3339 expiry; an expired one no longer counts."""
    if value == "forever":
        return True
    until = common.parse_rfc3339(value) if isinstance(value, str) else None
    return until is not None and until > (time.time() if now is None else now)


def _quoted(names):
    # strutil.Quoted
    return ", ".join(common.go_quote(n) for n in names)


def _check_installed(names):
    # The daemon refuses to (un)hold a snap that is not installed.
    rec = common.load_install()
    for name in names:
        if name != common.SNAP_NAME or not rec:
            raise SnapError('snap "{}" is not installed'.format(name))
    return rec


def hold_refreshes(value, names):
    """cmd_snap_op.go holdRefreshes."""
    if value == "forever":
        until = "forever"
    else:
        try:
            nanos = common.parse_go_duration(value)
        except ValueError as e:
            raise SnapError('hold value must be a number of hours, minutes or seconds, or "forever": {}'.format(e))
        if nanos < 10**9:
            raise SnapError("cannot hold refreshes for less than a second: {}".format(value))
        until = common.rfc3339_local(time.time() + nanos / 1e9)
    when = "indefinitely" if until == "forever" else "until {}".format(until)
    if not names:
        system = common.load_system()
        system["refresh.hold"] = until
        common.save_system(system)
        common.out("Auto-refresh of all snaps held {}".format(when))
        return 0
    rec = _check_installed(names)
    rec["hold"] = until
    common.save_install(rec)
    common.out("General refreshes of {} held {}".format(_quoted(names), when))
    return 0


def unhold_refreshes(names):
    """cmd_snap_op.go unholdRefreshes."""
    if not names:
        system = common.load_system()
        system.pop("refresh.hold", None)
        common.save_system(system)
        common.out("Removed auto-refresh hold on all snaps")
        return 0
    rec = _check_installed(names)
    rec.pop("hold", None)
    common.save_install(rec)
    common.out("Removed general refresh hold of {}".format(_quoted(names)))
    return 0


def cmd_refresh(args):
    opts, names = parse_flags(
        args,
        {"channel", "revision", "cohort"},
        {"classic", "devmode", "jailmode", "amend", "leave-cohort", "ignore-validation", "list", "time",
         "unhold", "no-wait", *catalog.RISKS},
        {"hold": "forever"},
    )
    if opts.get("hold") == "":
        del opts["hold"]  # `--hold=` leaves the option unset, as go-flags does
    # --hold/--unhold take no other flag (otherFlags in
    # https://github.com/canonical/snapd/blob/master/cmd/snap/cmd_snap_op.go; the stand-in also
    # refuses the channel and mode flags with them).  --no-wait is the wait mixin's, not a
    # refresh option.
    others = [k for k in opts if k not in ("hold", "unhold", "no-wait")]
    if "hold" in opts and ("unhold" in opts or others):
        raise SnapError("cannot use --hold with other flags")
    if "unhold" in opts and others:
        raise SnapError("cannot use --unhold with other flags")
    if "hold" in opts:
        return hold_refreshes(opts["hold"], names)
    if "unhold" in opts:
        return unhold_refreshes(names)
    if not names:
        # Nothing to refresh within a channel (one revision per track); a per-snap hold
        # would block this form anyway.
        common.err("All snaps up to date.")
        return 0
    _only_microk8s(names, "refresh")
    cur = common.load_install()
    if not cur:
        common.err('snap "microk8s" is not installed')
        return 0
    wanted = requested_channel(opts) if ("channel" in opts or any(opts.get(r) for r in catalog.RISKS)) else cur["channel"]
    new = dict(cur)  # keeps the hold (an explicit refresh of a held snap keeps it held) and services state
    new.update(resolve(wanted))
    if new["channel"] == cur["channel"] and new["revision"] == cur["revision"]:
        common.err('snap "microk8s" has no updates available')
        return 0
    new["services_active"] = cur.get("services_active", True)
    if new["revision"] != cur["revision"]:
        agent.stop_agent()
        old_dir = common.rpath("/var/snap/microk8s/{}".format(cur["revision"]))
        new_dir = common.rpath("/var/snap/microk8s/{}".format(new["revision"]))
        if not os.path.exists(new_dir):
            # snapd copies SNAP_DATA to the new revision and keeps the old one for reverts.
            shutil.copytree(old_dir, new_dir, symlinks=True)
        common.remove(os.path.join(new_dir, "var", "run", agent.PROCESS_TAG + ".pid"))
        layout.create_snap_dir(new["revision"], new["track"])
        layout.point_data_current(new["revision"])
        # The new kubelet reports its version once the services run again (now, or at the next start).
        mk.mark_node_report_pending()
    common.save_install(new)
    if new["services_active"]:
        agent.start_agent()
        mk.report_node_if_pending()
    common.out(done_line(new, "refreshed"))
    return 0


def cmd_remove(args):
    opts, names = parse_flags(args, {"revision"}, {"purge", "terminate", "no-wait"})
    if not names:
        raise SnapError("the required argument `<snap> (at least 1 argument)` was not provided")
    for name in names:
        if name != common.SNAP_NAME or not common.load_install():
            common.err('snap "{}" is not installed'.format(name))
            continue
        agent.kill_all_agents(common.root())
        layout.remove_all()
        common.out("microk8s removed")
    return 0


def cmd_list(args):
    opts, names = parse_flags(args, set(), {"all", "unicode", "color"})
    rec = common.load_install()
    if names and (not rec or any(n != common.SNAP_NAME for n in names)):
        raise SnapError("no matching snaps installed")
    if not rec:
        common.err("No snaps are installed yet. Try 'snap install hello-world'.")
        return 0
    tracking = rec["channel"]
    parts = tracking.split("/")
    if len(parts) == 3:
        tracking = "{}/{}/…".format(parts[0], parts[1])
    notes = "classic,held" if hold_in_effect(rec.get("hold")) else "classic"
    rows = [
        ["Name", "Version", "Rev", "Tracking", "Publisher", "Notes"],
        ["microk8s", rec["version"], str(rec["revision"]), tracking, "canonical" + badge(), notes],
    ]
    common.out(*common.tabwrite(rows, minwidth=5, padding=2))
    return 0


def _service_cmd(args, verb):
    opts, names = parse_flags(args, set(), {"enable", "disable", "reload"})
    if not names:
        raise SnapError("the required argument `<service> (at least 1 argument)` was not provided")
    rec = common.load_install()
    for name in names:
        if name.split(".", 1)[0] != common.SNAP_NAME or not rec:
            raise SnapError('snap "{}" not found'.format(name.split(".", 1)[0]))
    if verb == "stop":
        agent.stop_agent()
        rec["services_active"] = False
        common.save_install(rec)
        common.out("Stopped.")
    else:
        if verb == "restart":
            agent.stop_agent()
        rec["services_active"] = True
        common.save_install(rec)
        agent.start_agent()
        mk.report_node_if_pending()
        common.out("Started." if verb == "start" else "Restarted.")
    return 0


COMMANDS = {
    "install": cmd_install,
    "refresh": cmd_refresh,
    "remove": cmd_remove,
    "list": cmd_list,
    "start": lambda a: _service_cmd(a, "start"),
    "stop": lambda a: _service_cmd(a, "stop"),
    "restart": lambda a: _service_cmd(a, "restart"),
}


def main(argv):
    if not argv or argv[0] in ("help", "--help", "-h"):
        common.out(
            "The snap command lets you install, configure, refresh and remove snaps.",
            "(kos stand-in: install, refresh (--hold/--unhold), remove, list, start, stop, restart of microk8s)",
        )
        return 0
    cmd = argv[0]
    if cmd not in COMMANDS:
        common.err("error: unknown command \"{}\", see 'snap help'.".format(cmd))
        return 64
    try:
        return COMMANDS[cmd](argv[1:])
    except FlagError as e:
        common.err("error: {}".format(e))
        return 64
    except SnapError as e:
        common.err("error: {}".format(e))
        return e.code
