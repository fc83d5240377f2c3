"""A pflag/cobra-like command line parser with the real error texts."""

from . import gofmt


class FlagError(Exception):
    pass


_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


class Flag:
    def __init__(self, name, kind="string", short=None, default=None):
        self.name = name
        self.kind = kind  # bool | string | int | slice | duration | count
        self.short = short
        if default is None:
            default = {"bool": False, "slice": [], "count": 0}.get(kind)
        self.default = default

    @property
    def shown(self):
        return "-%s, --%s" % (self.short, self.name) if self.short else "--" + self.name

    def convert(self, raw, current):
        if self.kind == "bool":
            if raw in _TRUE:
                return True
            if raw in _FALSE:
                return False
            raise FlagError('invalid argument "%s" for "%s" flag: strconv.ParseBool: parsing '
                            '"%s": invalid syntax' % (raw, self.shown, raw))
        if self.kind in ("int", "count"):
            try:
                return int(raw)
            except ValueError:
                raise FlagError('invalid argument "%s" for "%s" flag: strconv.ParseInt: '
                                'parsing "%s": invalid syntax' % (raw, self.shown, raw))
        if self.kind == "duration":
            try:
                return gofmt.parse_duration(raw)
            except gofmt.DurationError as e:
                raise FlagError('invalid argument "%s" for "%s" flag: %s' % (raw, self.shown, e))
        if self.kind == "slice":
            items = [] if raw == "" else [x.strip() for x in raw.split(",")]
            return list(current or []) + items
        return raw


def parse(argv, flags):
    """Parse `argv` against `flags`; returns (values, set_names, positionals)."""
    by_name = {f.name: f for f in flags}
    by_short = {f.short: f for f in flags if f.short}
    values = {f.name: (list(f.default) if isinstance(f.default, list) else f.default)
              for f in flags}
    set_names = []
    positionals = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            positionals.extend(argv[i:])
            break
        if arg.startswith("--") and len(arg) > 2:
            name, eq, raw = arg[2:].partition("=")
            f = by_name.get(name)
            if f is None:
                raise FlagError("unknown flag: --%s" % name)
            if not eq:
                if f.kind == "bool":
                    raw = "true"
                elif f.kind == "count":
                    raw = str((values[f.name] or 0) + 1)
                elif i < len(argv):
                    raw = argv[i]
                    i += 1
                else:
                    raise FlagError("flag needs an argument: --%s" % name)
            values[f.name] = f.convert(raw, values[f.name] if f.kind == "slice" else None)
            set_names.append(f.name)
        elif arg.startswith("-") and len(arg) > 1:
            shorts = arg[1:]
            j = 0
            while j < len(shorts):
                c = shorts[j]
                f = by_short.get(c)
                if f is None:
                    raise FlagError("unknown shorthand flag: '%s' in -%s" % (c, shorts))
                rest = shorts[j + 1:]
                if f.kind == "bool":
                    if rest.startswith("="):
                        values[f.name] = f.convert(rest[1:], None)
                        j = len(shorts)
                    else:
                        values[f.name] = True
                        j += 1
                    set_names.append(f.name)
                    continue
                if f.kind == "count":
                    values[f.name] = (values[f.name] or 0) + 1
                    set_names.append(f.name)
                    j += 1
                    continue
                if rest:
                    raw = rest[1:] if rest.startswith("=") else rest
                elif i < len(argv):
                    raw = argv[i]
                    i += 1
                else:
                    raise FlagError("flag needs an argument: '%s' in -%s" % (c, shorts))
                values[f.name] = f.convert(raw, values[f.name] if f.kind == "slice" else None)
                set_names.append(f.name)
                break
        else:
            positionals.append(arg)
    return values, set_names, positionals


def find_command(argv, tree, flags_of):
    """Cobra's Find: walk subcommand words, skipping flags (and their values).

    `tree` maps a word to a subtree (dict) or None for leaves; `flags_of(path)` returns the
    flags known at that command path.  Returns (path, remaining_args).
    """
    path = []
    rest = []
    node = tree
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest.extend(argv[i:])
            break
        if arg.startswith("-") and len(arg) > 1:
            rest.append(arg)
            if "=" not in arg:
                known = {f.name: f for f in flags_of(path)}
                shorts = {f.short: f for f in flags_of(path) if f.short}
                f = known.get(arg[2:]) if arg.startswith("--") else (
                    shorts.get(arg[1]) if len(arg) == 2 else None)
                if f is not None and f.kind not in ("bool", "count") and i + 1 < len(argv):
                    rest.append(argv[i + 1])
                    i += 1
            i += 1
            continue
        if isinstance(node, dict) and arg in node:
            path.append(arg)
            node = node[arg]
            i += 1
            continue
        rest.extend(argv[i:])
        break
    return path, rest
