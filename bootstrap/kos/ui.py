"""Progress and logs go to stderr (rich); data goes to stdout, and nothing else does."""

import json
import sys
import time
from contextlib import contextmanager

from rich.console import Console
from rich.text import Text

from .errors import Interrupted

console = Console(stderr=True, highlight=False, soft_wrap=True)


def _say(style, mark, message):
    text = Text()
    text.append(f"{mark} ", style=style)
    text.append(str(message))
    console.print(text)


def info(message):
    _say("cyan", "•", message)


def ok(message):
    _say("green", "✓", message)


def warn(message):
    _say("yellow", "!", message)


def fail(message):
    _say("bold red", "✗", message)


def detail(message):
    console.print(Text(f"    {message}", style="dim"))


@contextmanager
def step(title):
    """Announce a step; mark it done or failed, with its duration, when the block ends."""
    _say("bold cyan", "▶", title)
    started = time.monotonic()
    try:
        yield
    except BaseException as exc:
        how = "interrupted" if isinstance(exc, (KeyboardInterrupt, Interrupted)) else "failed"
        fail(f"{title}: {how} after {time.monotonic() - started:.0f}s")
        raise
    ok(f"{title}: done in {time.monotonic() - started:.0f}s")


def error(problem, fix=None, details=()):
    _say("bold red", "error:", problem)
    for line in details:
        detail(line)
    if fix:
        _say("yellow", "  fix:", fix)


def data(value, as_json=True):
    """Machine-readable output: stdout only."""
    if as_json:
        sys.stdout.write(json.dumps(value, indent=2, sort_keys=True, default=str) + "\n")
    else:
        sys.stdout.write(str(value))
        if not str(value).endswith("\n"):
            sys.stdout.write("\n")
    sys.stdout.flush()
