"""Bounded reading of every input file kvsim takes (scenarios, hardware profiles, model files, traces,
length files, measurement CSVs): a size cap, UTF-8, and YAML/JSON parsing that cannot be driven into
unbounded time, memory or recursion. Every failure is a one-line KvsimError naming the file (and line).

YAML: no duplicate keys, at most MAX_YAML_NODES nodes once aliases are expanded (a "billion laughs"
document is refused before it is built), at most MAX_DEPTH levels of nesting, no recursive aliases.
JSON: the same depth bound; NaN / Infinity and numbers that overflow a float are refused.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from kvsim.errors import KvsimError, excerpt

MAX_FILE_BYTES = 16 * 2**20
"""Largest YAML / JSON file read whole (scenarios, profiles, model configs are kilobytes)."""
MAX_YAML_NODES = 200_000
MAX_DEPTH = 64
MAX_INT_DIGITS = 30
"""Integers longer than this many digits are refused before Python parses them."""


def check_file(path: str | Path, what: str = "file") -> Path:
    """The path as a readable regular file, or a one-line error (missing, a directory, a device...)."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise KvsimError(f"{p}: {what} not found") from None
    except ValueError:  # an embedded NUL byte
        raise KvsimError(f"{excerpt(str(p))}: not a valid path") from None
    except OSError as exc:
        raise KvsimError(f"{p}: cannot read {what}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise KvsimError(f"{p}: is a directory, expected a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise KvsimError(f"{p}: not a regular file, expected a {what}")
    if not os.access(p, os.R_OK):
        raise KvsimError(f"{p}: cannot read {what}: permission denied")
    return p


def read_text(path: str | Path, what: str = "file", max_bytes: int = MAX_FILE_BYTES) -> str:
    """A whole text file as str: at most max_bytes, UTF-8 (a leading BOM is dropped)."""
    p = check_file(path, what)
    try:
        with p.open("rb") as fh:
            raw = fh.read(max_bytes + 1)
    except OSError as exc:
        raise KvsimError(f"{p}: cannot read {what}: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise KvsimError(f"{p}: {what} larger than {max_bytes // 2**20} MiB")
    return decode_utf8(raw, p)


def decode_utf8(raw: bytes, source: str | Path) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise KvsimError(f"{source}:{line}: not UTF-8 text (byte {exc.start})") from None
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise KvsimError(f"{source}:{line}: binary data (NUL byte), expected text")
    return text.removeprefix("\ufeff")


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys and over-long integers."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                dup = key in seen
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a scalar", key_node.start_mark) from None
            if dup:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {excerpt(key)}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > MAX_INT_DIGITS:
            raise yaml.constructor.ConstructorError(
                None, None, f"integer with {digits} digits is out of range", node.start_mark)
        return super().construct_yaml_int(node)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = super().construct_yaml_float(node)
        if not math.isfinite(value):
            raise yaml.constructor.ConstructorError(
                None, None, f"number {excerpt(node.value)} is not finite", node.start_mark)
        return value


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_yaml_float)


def _check_graph(root: yaml.Node, source: str) -> None:
    """Refuse a node graph that expands to more than MAX_YAML_NODES nodes, nests deeper than MAX_DEPTH,
    or refers to itself. Iterative, and each shared (aliased) node is sized once."""
    size: dict[int, int] = {}
    open_ids: set[int] = set()
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            open_ids.discard(key)
            children = _children(node)
            size[key] = 1 + sum(size[id(c)] for c in children)
            if size[key] > MAX_YAML_NODES:
                raise KvsimError(f"{source}: YAML expands to more than {MAX_YAML_NODES:,} nodes "
                                 "(aliases repeated too often?)")
            continue
        if depth > MAX_DEPTH:
            raise KvsimError(f"{source}:{node.start_mark.line + 1}: nesting deeper than {MAX_DEPTH} levels")
        if key in size:
            continue
        if key in open_ids:
            raise KvsimError(f"{source}:{node.start_mark.line + 1}: recursive alias")
        open_ids.add(key)
        stack.append((node, depth, True))
        for child in _children(node):
            if id(child) not in size:
                stack.append((child, depth + 1, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def parse_yaml(text: str, source: str) -> Any:
    """Parse one YAML document with the bounds above; None for an empty document."""
    loader = None
    try:
        loader = _Loader(text)  # the reader refuses control characters YAML does not allow
        node = loader.get_single_node()
        if node is None:
            return None
        _check_graph(node, source)
        return loader.construct_document(node)
    except yaml.reader.ReaderError as exc:
        line = text[: exc.position].count("\n") + 1
        raise KvsimError(f"{source}:{line}: character #x{exc.character:04x} is not allowed in YAML") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise KvsimError(f"{source}:{where}: {problem}" if where else f"{source}: {problem}") from None
    except RecursionError:
        raise KvsimError(f"{source}: nesting deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # e.g. a number PyYAML cannot convert
        raise KvsimError(f"{source}: invalid YAML value ({excerpt(str(exc))})") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_yaml(path: str | Path, what: str = "YAML file") -> Any:
    """read_text + parse_yaml."""
    return parse_yaml(read_text(path, what), str(path))


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def _parse_json_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {excerpt(text)} is out of range")
    return value


def _parse_json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"integer with {len(text.lstrip('-'))} digits is out of range")
    return int(text)


def parse_json(text: str, source: str) -> Any:
    """Parse JSON text: finite numbers only, integers of at most MAX_INT_DIGITS digits, depth bounded."""
    depth = max_nesting(text)
    if depth > MAX_DEPTH:
        raise KvsimError(f"{source}: nesting deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_parse_json_float,
                          parse_int=_parse_json_int)
    except json.JSONDecodeError as exc:
        raise KvsimError(f"{source}:{exc.lineno}: bad JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise KvsimError(f"{source}: bad JSON ({excerpt(str(exc), 80)})") from None


def max_nesting(text: str) -> int:
    """Deepest bracket nesting in JSON text, ignoring brackets inside strings (a cheap pre-check that
    keeps json.loads away from deep recursion)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return 0  # cannot nest deeper than that: skip the scan
    depth = deepest = 0
    in_str = escaped = False
    for ch in text:
        if in_str:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest
