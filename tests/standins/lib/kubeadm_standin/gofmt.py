"""Go formatting the real tools rely on: text/tabwriter, durations, klog headers, RFC3339."""

import datetime
import os
import re
import sys
import time


class TabWriter:
    """Port of Go's text/tabwriter (flags 0 or RememberWidths, padchar ' ').

    Cells are tab-terminated; the text after the last tab of a line is not part of any
    column, which is why kubeadm's token table has no trailing padding on EXTRA GROUPS.
    """

    def __init__(self, minwidth, tabwidth, padding):
        self.minwidth = minwidth
        self.tabwidth = tabwidth
        self.padding = padding
        self.text = ""

    def write(self, s):
        self.text += s

    def flush(self):
        text, self.text = self.text, ""
        if not text:
            return ""
        lines = text.split("\n")
        trailing_newline = text.endswith("\n")
        if trailing_newline:
            lines = lines[:-1]
        cells = [line.split("\t") for line in lines]
        out = []
        self._format(cells, 0, len(cells), [], out)
        result = "\n".join(out)
        return result + ("\n" if trailing_newline else "")

    def _format(self, cells, line0, line1, widths, out):
        column = len(widths)
        this = line0
        while this < line1:
            line = cells[this]
            if column >= len(line) - 1:
                this += 1
                continue
            self._write_lines(cells, line0, this, widths, out)
            line0 = this
            width = self.minwidth
            while this < line1:
                line = cells[this]
                if column >= len(line) - 1:
                    break
                w = len(line[column]) + self.padding
                if w > width:
                    width = w
                this += 1
            self._format(cells, line0, this, widths + [width], out)
            line0 = this
        self._write_lines(cells, line0, line1, widths, out)

    @staticmethod
    def _write_lines(cells, line0, line1, widths, out):
        for i in range(line0, line1):
            line = cells[i]
            parts = []
            for j, c in enumerate(line):
                if j < len(widths):
                    parts.append(c + " " * (widths[j] - len(c)))
                else:
                    parts.append(c)
            out.append("".join(parts))


def tabwrite(text, minwidth, tabwidth, padding):
    """Go's tabwriter output for `text` (lines separated by \\n, cells by \\t)."""
    w = TabWriter(minwidth, tabwidth, padding)
    w.write(text)
    return w.flush()


# ---------------------------------------------------------------------------
# durations

_UNITS = {
    "ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3,
    "s": 1.0, "m": 60.0, "h": 3600.0,
}
_DUR_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")


class DurationError(ValueError):
    pass


def parse_duration(text):
    """Go's time.ParseDuration, returning seconds (float)."""
    orig = text
    if text in ("0", "+0", "-0"):
        return 0.0
    if not text:
        raise DurationError('time: invalid duration "%s"' % orig)
    sign = 1.0
    if text[0] in "+-":
        sign = -1.0 if text[0] == "-" else 1.0
        text = text[1:]
    total = 0.0
    pos = 0
    while pos < len(text):
        m = _DUR_PART.match(text, pos)
        if not m or m.group(1) in ("", "."):
            if re.match(r"[0-9.]+$", text[pos:]):
                raise DurationError('time: missing unit in duration "%s"' % orig)
            um = re.match(r"[0-9.]+([^0-9.]+)", text[pos:])
            if um and not m:
                raise DurationError('time: unknown unit "%s" in duration "%s"'
                                    % (um.group(1), orig))
            raise DurationError('time: invalid duration "%s"' % orig)
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def format_duration(seconds):
    """Go's time.Duration.String() for a duration given in seconds."""
    ns = int(round(seconds * 1e9))
    if ns == 0:
        return "0s"
    neg = ns < 0
    ns = abs(ns)
    if ns < 1000:
        out = "%dns" % ns
    elif ns < 1000000:
        out = _trim("%.3f" % (ns / 1e3)) + "\u00b5s"
    elif ns < 1000000000:
        out = _trim("%.6f" % (ns / 1e6)) + "ms"
    else:
        h, rem = divmod(ns, 3600 * 10**9)
        m, rem = divmod(rem, 60 * 10**9)
        s = _trim("%d.%09d" % divmod(rem, 10**9))
        out = ""
        if h:
            out += "%dh" % h
        if h or m:
            out += "%dm" % m
        out += s + "s"
    return ("-" if neg else "") + out


def _trim(num):
    if "." in num:
        num = num.rstrip("0").rstrip(".")
    return num


def short_human_duration(seconds):
    """k8s.io/apimachinery/pkg/util/duration.ShortHumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 60:
        return "%ds" % s
    minutes = int(seconds / 60)
    if minutes < 60:
        return "%dm" % minutes
    hours = int(seconds / 3600)
    if hours < 24:
        return "%dh" % hours
    if hours < 24 * 365:
        return "%dd" % (hours // 24)
    return "%dy" % int(hours / 24 / 365)


def human_duration(seconds):
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration (kubectl's AGE column)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 60 * 2:
        return "%ds" % s
    minutes = s // 60
    if minutes < 10:
        sec = s % 60
        return "%dm" % minutes if sec == 0 else "%dm%ds" % (minutes, sec)
    if minutes < 60 * 3:
        return "%dm" % minutes
    hours = s // 3600
    if hours < 8:
        m = minutes % 60
        return "%dh" % hours if m == 0 else "%dh%dm" % (hours, m)
    if hours < 48:
        return "%dh" % hours
    if hours < 24 * 8:
        h = hours % 24
        return "%dd" % (hours // 24) if h == 0 else "%dd%dh" % (hours // 24, h)
    if hours < 24 * 365 * 2:
        return "%dd" % (hours // 24)
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return "%dy" % (hours // 24 // 365) if dy == 0 else "%dy%dd" % (hours // 24 // 365, dy)
    return "%dy" % (hours // 24 // 365)


# ---------------------------------------------------------------------------
# time

def rfc3339(ts):
    """time.Time.Format(time.RFC3339) of a UTC unix timestamp."""
    return datetime.datetime.fromtimestamp(int(ts), datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text):
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    return datetime.datetime.fromisoformat(text).timestamp()


# ---------------------------------------------------------------------------
# klog

def klog(severity, where, msg, stream=None):
    """Write a klog line (`W0718 07:18:29.736833   14724 checks.go:846] msg`) to stderr."""
    now = time.time()
    t = time.localtime(now)
    micro = int((now - int(now)) * 1e6)
    header = "%s%02d%02d %02d:%02d:%02d.%06d %7d %s] " % (
        severity, t.tm_mon, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, micro, os.getpid(), where)
    stream = stream or sys.stderr
    stream.write(header + msg + "\n")
    stream.flush()
