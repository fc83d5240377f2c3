"""
How a pillar is judged against the kos schema (kos_schema.SCHEMA): fastjsonschema validates
it, compiled once, and each of its errors becomes one message
``pillar key 'a:b:c': <problem>; <fix>`` with the key path as the user writes it, worded from
the failing node of the schema and its kos keywords (fix, key_fix, secret, title). Also here:
the formats the schema names (FORMATS) and how values are quoted in messages.

fastjsonschema: https://horejsek.github.io/python-fastjsonschema/ (``fast_fail=False``, since
2.22.0, collects every error of one pass; each error carries its ``name``, ``value``,
``definition`` and ``rule``).
"""

import difflib
import ipaddress
import re
from collections.abc import Mapping

import fastjsonschema

# The schema is draft 4 (what salt.utils.schema serializes); without $schema fastjsonschema
# would apply its newest draft.
DRAFT4 = "http://json-schema.org/draft-04/schema#"
# msgpack carries integers in [-2**63, 2**64); Salt sends larger ones as decimal strings.
MSGPACK_INTS = range(-(2**63), 2**64)


# --- formats: name -> (check returning None or a reason, what it is, a good value) ---------

def _ip(value):
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return "wrong form"
    return None


def cidr(value):
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError:
        try:
            return f"host bits set: the network is {ipaddress.ip_network(value, strict=False)}"
        except ValueError:
            return "wrong form"
    return None


DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def _dns_name(value):
    if len(value) > 253 or not all(DNS_LABEL.match(p) for p in value.split(".")):
        return "use lower-case letters, digits and - between dots"
    return None


def _san(value):
    try:
        ipaddress.ip_address(value)
        return None
    except ValueError:
        return _dns_name(value.removeprefix("*."))


def _host_port(value):
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return "give host:port with a port 1-65535"
    return _san(host.strip("[]"))


def _regex(pattern):
    compiled = re.compile(pattern)
    return lambda value: None if compiled.fullmatch(value) else "wrong form"


FORMATS = {
    "ip": (_ip, "an IP address", "10.1.0.11"),
    "cidr": (cidr, "a network in CIDR notation", "10.1.0.0/16"),
    "dns-name": (_dns_name, "a DNS name", "prod.example.com"),
    "san": (_san, "an IP address or DNS name", "api.example.com"),
    "host-port": (_host_port, "host:port", "10.1.0.100:6443"),
    "abspath": (_regex(r"/[^\0]*"), "an absolute path", "/etc/kos"),
    "salt-url": (_regex(r"salt://\S+"), "a salt:// URL on the salt file server",
                 "salt://files/motd"),
    "url": (_regex(r"https?://\S+"), "an http(s):// URL", "https://keystone.example.com:5000/v3"),
    "https-url": (_regex(r"https://\S+"), "an https:// URL", "https://10.1.0.31:2379"),
    "mirror-url": (_regex(r"(https://|file:/)\S+"), "an https:// URL or a file: path (a mirror)",
                   "https://pkgs.k8s.io/core:/stable:/v1.31/deb/"),
    "unix-url": (_regex(r"unix:///\S+"), "a unix:// socket URL",
                 "unix:///var/run/containerd/containerd.sock"),
    "octal-mode": (_regex(r"0?[0-7]{3,4}"), "an octal file mode", "'0644'"),
    "ssh-public-key": (
        _regex(r"(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp\d+|sk-\S+) [A-Za-z0-9+/=]+.*"),
        "an OpenSSH public key", "the line from the user's .pub file"),
    "login-name": (_regex(r"[a-z_][a-z0-9_-]{0,31}"), "a login name", "alice"),
    "snap-channel": (_regex(r"(latest|[0-9]+\.[0-9]+(-strict)?)/(stable|candidate|beta|edge)"),
                     "a snap channel (track/risk)", "1.31/stable"),
    "k8s-version": (_regex(r"v[0-9]+\.[0-9]+\.[0-9]+"), "a Kubernetes version", "v1.31.4"),
    "deb-version": (_regex(r"[0-9][A-Za-z0-9.+~:-]*"), "a Debian package version", "1.31.4-1.1"),
    "package": (_regex(r"[a-z0-9][a-z0-9+.-]+"), "a Debian package name", "curl"),
    "image": (
        _regex(r"[a-z0-9][a-z0-9._/-]*(:[0-9]+)?(/[a-z0-9._-]+)*(:[\w.-]+)?(@sha256:[0-9a-f]{64})?"),
        "a container image reference", "registry.k8s.io/pause:3.10"),
    "name": (_regex(r"[A-Za-z0-9][A-Za-z0-9@_.:-]*"), "a name without spaces", "salt-minion"),
    "k8s-name": (_regex(r"[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?"),
                 "a Kubernetes object name (lower case, digits, '-' and '.')", "cinder-ssd"),
    "locale": (_regex(r"[A-Za-z]+(_[A-Za-z]+)?(\.[A-Za-z0-9-]+)?(@\w+)?"), "a locale", "C.UTF-8"),
    "duration": (_regex(r"[0-9]+(s|m|h|d|w)"), "a fail2ban duration", "1h (or seconds: 3600)"),
    "haproxy-time": (_regex(r"[0-9]+(us|ms|s|m|h|d)"), "an haproxy time", "2s"),
    "percent": (_regex(r"([1-9][0-9]?|100)%"), "a percentage of 1-100%", "'10%'"),
    "minion-id": (_regex(r"[a-z0-9][a-z0-9.-]*"), "a minion id (host.domain)",
                  "k8s-cp-1.prod.example.com"),
    "text": (_regex(r"[^\n]+"), "one line of text", "RegionOne"),
    "secret": (_regex(r"\S+"), "a non-empty string", None),
}


def _reason(check, value):
    try:
        return check(value)
    except ValueError as exc:
        return str(exc)


def _passes(check):
    return lambda value: _reason(check, value) is None


# What fastjsonschema applies for each format: a callable returning whether the string passes.
FORMAT_TESTS = {name: _passes(check) for name, (check, _, _) in FORMATS.items()}


# --- values in messages ------------------------------------------------------------------------

def plain(value):
    """Builtin containers for a message: Salt 3008 wraps pillar in MaskedDict/MaskedList,
    whose repr is '**********'. Only called where the key is not secret."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in dict.items(value)}
    if isinstance(value, list):
        return [plain(v) for v in list.__iter__(value)]
    return value


def json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


TYPE_NAMES = {"object": "a mapping", "array": "a list", "string": "a string",
              "integer": "an integer", "number": "a number", "boolean": "true or false",
              "null": "null"}


def literal(value, secret):
    """The value as a message quotes it: never when its key is secret."""
    if value is None or isinstance(value, bool):
        return "null" if value is None else str(value).lower()
    if secret:
        return "(not shown: secret)"
    text_ = repr(plain(value))
    return text_ if len(text_) <= 60 else text_[:57] + "..."


def shown(value, secret):
    """'a string 'yes'', 'a list [...]', 'true', 'null'."""
    if value is None or isinstance(value, bool):
        return literal(value, secret)
    kind = json_type(value)
    return f"{TYPE_NAMES.get(kind, kind)} {literal(value, secret)}"


def key_path(parts):
    return ":".join(str(p) for p in parts)


# --- errors as messages --------------------------------------------------------------------------

# The keywords the schema may use: the draft-4 ones whose failure is worded below (another
# would get a generic message), annotations, and the kos keywords.
KEYWORDS = frozenset("""type properties patternProperties additionalProperties required items
    maxItems minProperties enum format minimum maximum anyOf title description fix key_fix
    secret""".split())


class Problem:
    def __init__(self, where, problem, fix):
        self.where = tuple(str(p) for p in where)
        self.problem, self.fix = problem, fix

    def __str__(self):
        return f"pillar key '{key_path(self.where)}': {self.problem}; {self.fix}"


def coerce_big_int(node, value):
    """An integer beyond msgpack's range arrives as its decimal string: judge the number."""
    if node.get("type") == "integer" and isinstance(value, str) and \
            re.fullmatch(r"-?[0-9]+", value) and int(value) not in MSGPACK_INTS:
        return int(value)
    return value


def _type_matches(expected, kind):
    return kind == expected or expected == "number" and kind == "integer"


def _copy(value):
    """The pillar in builtin containers with string keys: what the validator judges, and
    coerces big integers in. Salt 3008 hands modules MaskedDict/MaskedList."""
    if isinstance(value, Mapping):
        items = dict.items(value) if isinstance(value, dict) else value.items()
        return {str(k): _copy(v) for k, v in items}
    if isinstance(value, (list, tuple)):
        return [_copy(v) for v in (list.__iter__(value) if isinstance(value, list) else value)]
    return value


def _paths(data, rest):
    """(path, value) for each way ``rest`` of an error's name ('.key' and '[index]' steps)
    reads in ``data``: a key may hold dots (sysctl names, minion ids), so the name is
    matched against the keys there are rather than split."""
    if not rest:
        yield (), data
        return
    if isinstance(data, list) and rest[0] == "[":
        index, _, tail = rest[1:].partition("]")
        if index.isdigit() and int(index) < len(data):
            for path, value in _paths(data[int(index)], tail):
                yield (int(index), *path), value
    if isinstance(data, dict) and rest[0] == ".":
        for key in data:
            if rest.startswith(key, 1):
                for path, value in _paths(data[key], rest[1 + len(key):]):
                    yield (key, *path), value


def _locate(data, exc):
    """The path in ``data`` of the value ``exc`` is about."""
    found = list(_paths(data, exc.name[len("data"):]))
    return next((path for path, value in found if value is exc.value),
                found[0][0] if found else ())


def _children(node, key):
    """The schema nodes that judge ``key`` of a mapping (or an index of a list) of ``node``."""
    if isinstance(key, int):
        items = node.get("items")
        return [items] if isinstance(items, dict) else []
    found = [node["properties"][key]] if key in node.get("properties", {}) else []
    found += [child for pattern, child in node.get("patternProperties", {}).items()
              if re.search(pattern, key)]
    extra = node.get("additionalProperties")
    return found or ([extra] if isinstance(extra, dict) else [])


def _route(node, path):
    """The nodes at each step of ``path`` from ``node``. An error inside an anyOf is reported
    at the anyOf, so a route never passes through one."""
    route = [[node]]
    for key in path:
        route.append([child for parent in route[-1] for child in _children(parent, key)])
    return route


def _unknown_keys(node, value):
    if node.get("additionalProperties", True) is not False:
        return []
    patterns = node.get("patternProperties", {})
    return [k for k in value if k not in node.get("properties", {})
            and not any(re.search(p, k) for p in patterns)]


def _big_ints(data, errors):
    """{path: number} for each integer that came as its decimal string (coerce_big_int)."""
    return {_locate(data, exc): number for exc in errors if exc.rule == "type"
            for number in [coerce_big_int(exc.definition, exc.value)] if number is not exc.value}


def _put(data, values):
    """``data`` with each path of ``values`` set to its value."""
    for path, value in values.items():
        if not path:
            return value
        parent = data
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = value
    return data


class Validator:
    """``schema`` compiled by fastjsonschema on first use, and its errors as Problems."""

    def __init__(self, schema, retired):
        self.schema, self.retired = schema, retired
        self._compiled = {}

    def _errors(self, node, data):
        """Every error of ``data`` against ``node`` (fastjsonschema's fast_fail=False)."""
        # Keyed by identity (nodes are dicts): the entry holds its node, so the id stays its.
        node_, validate = self._compiled.get(id(node), (None, None))
        if node_ is not node:
            validate = fastjsonschema.compile({**node, "$schema": DRAFT4}, formats=FORMAT_TESTS,
                                              use_default=False, fast_fail=False)
            self._compiled[id(node)] = node, validate
        try:
            validate(data)
        except fastjsonschema.JsonSchemaValuesException as exc:
            return exc.errors
        except fastjsonschema.JsonSchemaValueException as exc:
            return [exc]
        return []

    def problems(self, value, node=None, where=(), secret=False):
        """One Problem per bad key of ``value`` (judged by ``node``, the whole schema if
        None; ``where`` is the path of value, ``secret`` whether it is below a secret)."""
        node = self.schema if node is None else node
        data = _copy(value)
        errors = self._errors(node, data)
        numbers = _big_ints(data, errors)
        if numbers:
            data = _put(data, numbers)
            errors = self._errors(node, data)
        found, specific = {}, set()
        for exc in errors:
            for problem in self._explain(node, data, exc, where, secret):
                # One message per key. Where several nodes judge a key (a sysctl name kos
                # bounds matches two patterns), the one with its own fix was written for it.
                if problem.where not in found or "fix" in exc.definition and \
                        problem.where not in specific:
                    found[problem.where] = problem
                    if "fix" in exc.definition:
                        specific.add(problem.where)
        return list(found.values())

    def _explain(self, root, data, exc, where, secret):
        path = _locate(data, exc)
        route = _route(root, path)
        here = where + path
        secret = secret or any(n.get("secret") or n.get("format") == "secret"
                               for step in route for n in step)
        # exc.definition is a copy of the failing node: the schema's own is the one compiled.
        node = next((n for n in route[-1] if n == exc.definition), exc.definition)
        value, rule = exc.value, exc.rule
        if value is None and path and any(path[-1] in parent.get("required", ())
                                          for parent in route[-2]):
            return [Problem(here, "is missing", self._set_it(node))]
        if rule == "anyOf":
            return self._any_of(node, value, here, secret)
        if rule == "type":
            return [self._type_error([node], value, here, secret)]
        if rule == "required":
            return self._missing(node, value, here)
        if rule == "additionalProperties":
            return [self._unknown(node, name, here) for name in _unknown_keys(node, value)]
        if rule == "minProperties":
            return [Problem(here, "is empty", f"list at least one {node.get('title') or 'entry'}")]
        if rule == "maxItems":
            return [Problem(here, f"has {len(value)} entries", f"give at most {node['maxItems']}")]
        if rule == "enum":
            what = node.get("title")
            problem = f"unknown {what} {literal(value, secret)}" if what else \
                f"{shown(value, secret)} is not allowed"
            return [Problem(here, problem,
                            node.get("fix") or f"use one of {', '.join(map(str, node['enum']))}")]
        if rule == "format" and node.get("format") in FORMATS:
            check, name, example = FORMATS[node["format"]]
            reason = _reason(check, value)
            detail = "" if reason == "wrong form" or secret else f" ({reason})"
            fix = node.get("fix") or f"use {name}" + (f", e.g. {example}" if example else "")
            return [Problem(here, f"{literal(value, secret)} is not {name}{detail}", fix)]
        if rule in ("minimum", "maximum"):
            low, high = node.get("minimum"), node.get("maximum")
            side = "below the minimum" if rule == "minimum" else "above the maximum"
            span = f"{low}-{high}" if None not in (low, high) else \
                (f"at least {low}" if low is not None else f"at most {high}")
            return [Problem(here, f"{value} is out of range ({side})",
                            node.get("fix") or f"use an integer {span}")]
        # A keyword outside KEYWORDS: still refused, in the schema's words.
        return [Problem(here, f"{shown(value, secret)} fails {rule} {exc.rule_definition!r}",
                        node.get("fix") or "see pillar.example")]

    @staticmethod
    def _set_it(node):
        about = (node.get("description") or "").rstrip(".")
        return node.get("fix") or "set it" + (f" ({about})" if about else "")

    def _any_of(self, node, value, where, secret):
        """The problems of the option of the value's type (the value is valid by none)."""
        options = [o for option in node["anyOf"] for o in option.get("anyOf", [option])]
        kind = json_type(coerce_big_int({"type": "integer"}, value))
        candidates = [o for o in options if _type_matches(o.get("type"), kind)]
        if candidates:
            return self.problems(value, candidates[0], where, secret)
        return [self._type_error(options, value, where, secret)]

    def _missing(self, node, value, where):
        properties = node.get("properties", {})
        # A misspelt required key is one error: the unknown key's "did you mean".
        meant = {close for name in _unknown_keys(node, value)
                 for close in difflib.get_close_matches(name, list(properties), n=1, cutoff=0.6)}
        return [Problem(where + (key,), "is missing", self._set_it(properties.get(key, {})))
                for key in node["required"] if key not in value and key not in meant]

    def _unknown(self, node, name, where):
        if where + (name,) in self.retired:
            return Problem(where + (name,), *self.retired[where + (name,)])
        properties = node.get("properties", {})
        title = node.get("title") or "key"
        close = difflib.get_close_matches(name, list(properties), n=1, cutoff=0.6)
        if close:
            fix = f"did you mean '{close[0]}'?"
        elif "key_fix" in node:
            fix = node["key_fix"]
        elif len(properties) <= 12:
            fix = f"remove it; the keys here are {', '.join(properties)}"
        else:
            fix = "remove it; pillar.example lists every key"
        problem = f"unknown {title}" if properties else f"is not a valid {title}"
        return Problem(where + (name,), problem, fix)

    @staticmethod
    def _type_error(options, value, where, secret):
        names = []
        for option in options:
            name = FORMATS[option["format"]][1] if option.get("format") in FORMATS else \
                TYPE_NAMES.get(option.get("type"), option.get("type"))
            if name not in names:
                names.append(name)
        expected = " or ".join(names)
        real = [o for o in options if o.get("type") != "null"] or options
        first, kind = real[0], json_type(value)
        fix = next((o["fix"] for o in real if "fix" in o), None)
        if fix:
            pass
        elif value is None:
            fix = "remove the key to keep the default, or give it a value"
        elif first.get("type") == "boolean":
            fix = "write true or false, without quotes"
        elif first.get("type") == "integer" and kind == "string":
            fix = "write the number without quotes"
        elif first.get("type") == "object":
            fix = "write it as a mapping of keys, as pillar.example shows"
        elif first.get("type") == "array":
            fix = "write it as a list, e.g. [a, b]"
        elif first.get("type") == "string":
            example = FORMATS[first["format"]][2] if first.get("format") in FORMATS else None
            fix = ("quote it" if kind in ("integer", "number", "boolean") else "give one value") \
                + (f", e.g. {example}" if example else "")
        else:
            fix = f"give {expected}"
        return Problem(where, f"must be {expected}, got {shown(value, secret)}", fix)
