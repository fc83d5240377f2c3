"""A small YAML subset: enough for kubeadm configs, kubeconfigs and common manifests.

Supported: `---` separated documents, block mappings and sequences (including the
compact `- key: value` form), plain / single / double quoted scalars, flow collections
(`[a, b]`, `{k: v}`), block scalars (`|`, `|-`, `>`), comments.  Anchors, aliases and
complex keys are rejected with YamlError: PyYAML is not available in Debian's system
python, and these stand-ins only need to read what the project writes.
"""

import json
import re


class YamlError(ValueError):
    pass


_INT_RE = re.compile(r"^[-+]?(0|[1-9][0-9]*)$")
_FLOAT_RE = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")


def _scalar(text):
    """Type a plain scalar the way YAML 1.2 core schema (and sigs.k8s.io/yaml) would."""
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if _INT_RE.match(text):
        return int(text)
    if _FLOAT_RE.match(text) and any(c.isdigit() for c in text):
        return float(text)
    return text


def _strip_comment(line):
    """Remove a trailing comment that is not inside quotes."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                if quote == "'" and i + 1 < len(line) and line[i + 1] == "'":
                    continue
                quote = None
            elif ch == "\\" and quote == '"':
                continue
        elif ch in "'\"":
            # quotes only open a scalar at its start
            prev = line[:i].rstrip()
            if not prev or prev[-1] in ":-[{,":
                quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def _unquote(text):
    if text.startswith('"'):
        try:
            return json.loads(text)
        except ValueError:
            # YAML allows escapes JSON does not (\x, \e...); keep it simple
            return text[1:-1].encode().decode("unicode_escape")
    if text.startswith("'"):
        return text[1:-1].replace("''", "'")
    return text


def _find_map_colon(text):
    """Index of the `:` that separates key and value in `text`, or -1."""
    quote = None
    depth = 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
            continue
        if ch in "'\"" and i == 0:
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == ":" and depth == 0 and (i + 1 == len(text) or text[i + 1] in " \t"):
            return i
    return -1


class _Flow:
    """Parser for flow collections: [a, b], {a: b}."""

    def __init__(self, text):
        self.s = text
        self.i = 0

    def parse(self):
        value = self._value()
        self._ws()
        if self.i != len(self.s):
            raise YamlError("unexpected text after flow value: %r" % self.s)
        return value

    def _ws(self):
        while self.i < len(self.s) and self.s[self.i] in " \t\n":
            self.i += 1

    def _value(self):
        self._ws()
        if self.i >= len(self.s):
            return None
        ch = self.s[self.i]
        if ch == "[":
            self.i += 1
            items = []
            while True:
                self._ws()
                if self.s[self.i:self.i + 1] == "]":
                    self.i += 1
                    return items
                items.append(self._value())
                self._ws()
                if self.s[self.i:self.i + 1] == ",":
                    self.i += 1
        if ch == "{":
            self.i += 1
            out = {}
            while True:
                self._ws()
                if self.s[self.i:self.i + 1] == "}":
                    self.i += 1
                    return out
                key = self._value()
                self._ws()
                if self.s[self.i:self.i + 1] == ":":
                    self.i += 1
                    out[key] = self._value()
                else:
                    out[key] = None
                self._ws()
                if self.s[self.i:self.i + 1] == ",":
                    self.i += 1
        if ch in "'\"":
            j = self.i + 1
            while j < len(self.s):
                if self.s[j] == "\\" and ch == '"':
                    j += 2
                    continue
                if self.s[j] == ch:
                    if ch == "'" and self.s[j + 1:j + 2] == "'":
                        j += 2
                        continue
                    break
                j += 1
            text = self.s[self.i:j + 1]
            self.i = j + 1
            return _unquote(text)
        j = self.i
        while j < len(self.s) and self.s[j] not in ",]}":
            if self.s[j] == ":" and (j + 1 == len(self.s) or self.s[j + 1] in " ,]}"):
                break
            j += 1
        text = self.s[self.i:j].strip()
        self.i = j
        return _scalar(text)


def _value_of(text):
    text = text.strip()
    if text.startswith("!!"):
        text = text.split(None, 1)[1] if " " in text else ""
    if text.startswith(("&", "*")):
        raise YamlError("anchors and aliases are not supported: %r" % text)
    if text.startswith(("[", "{")):
        return _Flow(text).parse()
    if text.startswith(("'", '"')):
        return _unquote(text)
    return _scalar(text)


class _Lines:
    def __init__(self, raw_lines):
        self.raw = raw_lines
        self.i = 0

    def peek(self):
        """Next significant line as (indent, text) skipping blanks/comments, or None."""
        while self.i < len(self.raw):
            raw = self.raw[self.i]
            stripped = _strip_comment(raw)
            if stripped.strip() == "":
                self.i += 1
                continue
            indent = len(stripped) - len(stripped.lstrip(" "))
            return indent, stripped[indent:]
        return None


def _block_scalar(lines, header, parent_indent):
    style = header[0]
    chomp = header[1:2]
    out = []
    block_indent = None
    while lines.i < len(lines.raw):
        raw = lines.raw[lines.i].rstrip("\n")
        if raw.strip() == "":
            out.append("")
            lines.i += 1
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        if block_indent is None:
            if indent <= parent_indent:
                break
            block_indent = indent
        if indent < block_indent:
            break
        out.append(raw[block_indent:])
        lines.i += 1
    while out and out[-1] == "" and chomp != "+":
        out.pop()
    if style == ">":
        text = ""
        for idx, line in enumerate(out):
            if idx and line and out[idx - 1] and not line.startswith(" "):
                text += " " + line
            elif idx:
                text += "\n" + line
            else:
                text = line
    else:
        text = "\n".join(out)
    if chomp != "-" and out:
        text += "\n"
    return text


def _parse_node(lines, indent):
    nxt = lines.peek()
    if nxt is None or nxt[0] < indent:
        return None
    ind, text = nxt
    if text == "-" or text.startswith("- "):
        return _parse_seq(lines, ind)
    return _parse_map(lines, ind)


def _parse_seq(lines, indent):
    items = []
    while True:
        nxt = lines.peek()
        if nxt is None or nxt[0] != indent or not (nxt[1] == "-" or nxt[1].startswith("- ")):
            # a sequence may sit at the same indent as its parent key
            return items
        rest = nxt[1][1:].lstrip(" ")
        lines.i += 1
        if rest == "":
            items.append(_parse_node(lines, indent + 1))
            continue
        item_indent = indent + (len(nxt[1]) - len(rest))
        if rest.startswith("- "):
            # nested compact sequence: "- - a"
            lines.raw.insert(lines.i, " " * item_indent + rest)
            items.append(_parse_seq(lines, item_indent))
            continue
        colon = _find_map_colon(rest) if not rest.startswith(("[", "{")) else -1
        if colon >= 0:
            # compact mapping: "- key: value" continues on following lines at item_indent
            lines.raw.insert(lines.i, " " * item_indent + rest)
            items.append(_parse_map(lines, item_indent))
            continue
        if rest.startswith(("|", ">")):
            items.append(_block_scalar(lines, rest, indent))
            continue
        items.append(_value_of(rest))


def _parse_map(lines, indent):
    out = {}
    while True:
        nxt = lines.peek()
        if nxt is None or nxt[0] < indent:
            return out
        if nxt[0] > indent:
            raise YamlError("bad indentation near %r" % nxt[1])
        text = nxt[1]
        if text.startswith("- "):
            return out
        colon = _find_map_colon(text)
        if colon < 0:
            raise YamlError("expected 'key: value', got %r" % text)
        key = _value_of(text[:colon]) if text[:1] in "'\"" else text[:colon].strip()
        if isinstance(key, str) and key.startswith("? "):
            raise YamlError("complex keys are not supported")
        rest = text[colon + 1:].strip()
        lines.i += 1
        if rest == "":
            child = lines.peek()
            if child is not None and (child[0] > indent or (
                    child[0] == indent and (child[1] == "-" or child[1].startswith("- ")))):
                out[key] = _parse_node(lines, child[0])
            else:
                out[key] = None
        elif rest.startswith(("|", ">")) and re.match(r"^[|>][-+]?[0-9]*$", rest):
            out[key] = _block_scalar(lines, rest, indent)
        else:
            out[key] = _value_of(rest)


def split_documents(text):
    docs = [[]]
    for line in text.splitlines():
        if re.match(r"^---(\s|$)", line):
            docs.append([])
            rest = line[3:].strip()
            if rest and not rest.startswith("#"):
                docs[-1].append(rest)
        elif re.match(r"^\.\.\.(\s|$)", line):
            continue
        elif line.startswith("%"):
            continue
        else:
            docs[-1].append(line)
    return ["\n".join(d) for d in docs]


def load_all(text):
    """Parse every document; empty documents are dropped."""
    out = []
    for doc in split_documents(text):
        if not doc.strip():
            continue
        stripped = doc.strip()
        if stripped.startswith(("{", "[")):
            try:
                out.append(json.loads(stripped))
                continue
            except ValueError:
                pass
        lines = _Lines(doc.splitlines())
        first = lines.peek()
        if first is None:
            continue
        value = _parse_node(lines, first[0])
        leftover = lines.peek()
        if leftover is not None:
            raise YamlError("unexpected content: %r" % leftover[1])
        out.append(value)
    return out


def load(text):
    docs = load_all(text)
    return docs[0] if docs else None


# ---------------------------------------------------------------------------
# dumping

_PLAIN_OK = re.compile(r"^[A-Za-z0-9_./][A-Za-z0-9_./:=@+\-, ()$<>%~^*!?\\]*$")


def _needs_quotes(s):
    if s == "" or s != s.strip():
        return True
    if _scalar(s) is not None and not isinstance(_scalar(s), str):
        return True
    if s in ("~", "null", "Null", "NULL", "y", "n", "yes", "no", "on", "off", "Yes", "No"):
        return True
    if ": " in s or " #" in s or s.endswith(":"):
        return True
    return not _PLAIN_OK.match(s)


def _dump_scalar(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, float)):
        return repr(v)
    s = str(v)
    if _needs_quotes(s):
        if "'" not in s and "\n" not in s and "\\" not in s:
            return "'" + s + "'"
        return json.dumps(s)
    return s


def dump(value, sort_keys=True):
    """Dump like sigs.k8s.io/yaml: two-space indent, sequences not indented under keys."""
    lines = []
    _dump(value, 0, lines, sort_keys)
    return "\n".join(lines) + "\n"


def _dump(value, indent, lines, sort_keys):
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            lines.append(pad + "{}")
            return
        keys = sorted(value) if sort_keys else list(value)
        for k in keys:
            v = value[k]
            key = _dump_scalar(k)
            if isinstance(v, dict) and v:
                lines.append("%s%s:" % (pad, key))
                _dump(v, indent + 2, lines, sort_keys)
            elif isinstance(v, list) and v:
                lines.append("%s%s:" % (pad, key))
                _dump(v, indent, lines, sort_keys)
            elif isinstance(v, str) and "\n" in v:
                lines.append("%s%s: |%s" % (pad, key, "" if v.endswith("\n") else "-"))
                for sub in v.rstrip("\n").split("\n"):
                    lines.append((pad + "  " + sub) if sub else "")
            else:
                lines.append("%s%s: %s" % (pad, key, _inline(v)))
        return
    if isinstance(value, list):
        if not value:
            lines.append(pad + "[]")
            return
        for item in value:
            if isinstance(item, (dict, list)) and item:
                sub = []
                _dump(item, indent + 2, sub, sort_keys)
                first = sub[0]
                sub[0] = pad + "- " + first[indent + 2:]
                lines.extend(sub)
            else:
                lines.append("%s- %s" % (pad, _inline(item)))
        return
    lines.append(pad + _inline(value))


def _inline(v):
    if isinstance(v, dict):
        return "{}"
    if isinstance(v, list):
        return "[]"
    return _dump_scalar(v)
