"""Schema mutations of a valid scenario: bad values, unknown keys, sections replaced by scalars and
leaves written at the wrong level, applied in the YAML file (`broken_cases`) or given as
`--set KEY=VALUE` (`override_cases`, `spec_override_cases` for model / hardware fields)."""

from __future__ import annotations

import json
import math
from typing import Any

from cases import Case
from hypothesis import strategies as st
from schema_leaves import Leaf, Section, must_refuse, scenario_schema

from .common import MARKUP, Raw, _base_scenario, _mappings, run_argv, set_path, to_yaml, yaml_scalar_text
from .hardware import HW_BAD, HW_BASE, HW_NUMERIC
from .models import MODEL_BAD, MODEL_INT_FIELDS, TINY_MODEL
from .scenarios import valid_scenarios

# ---------------------------------------------------------------------------------------------------
# Schema mutations (broken / override)

_LEAVES, _SECTIONS = scenario_schema()
HUGE_TEXT = "x" * 100_000

BAD_VALUES: tuple[Any, ...] = (
    True, False, None, math.nan, math.inf, -math.inf, 1e308, -1e308, -0.0, 0, -1, 1, 0.5, 1.5, 2**31,
    2**63, 2**64 + 1, 10**25, -(10**25), "abc", "", " ", "16", "1e3", "nan", "inf", "-1", [], [1], {},
    {"a": 1}, "a\nb", "a\x1bb", "\u202e", "é" * 3, HUGE_TEXT, *MARKUP,
    Raw(".inf"), Raw("-.inf"), Raw(".NaN"), Raw("yes"), Raw("on"), Raw("off"), Raw("~"), Raw("0x10"),
    Raw("0o17"), Raw("1_000"), Raw("1e3"), Raw("1.0e+3"), Raw("!!float 16"), Raw("!!binary aGk="),
    Raw("2024-01-01"), Raw("12:30:00"), Raw("'16'"), Raw("!!int '16'"), Raw("9" * 400), Raw("1" + "0" * 40),
    Raw("&a 16"), Raw("!!str 5"), Raw("!!python/object:os.system x"), Raw("!!set {a, b}"),
    Raw("!!timestamp 2001-12-14"), Raw("[1, 2"), Raw("{a: 1"),
)
UNKNOWN_KEYS: tuple[Any, ...] = ("blocksize", "kv.block_size", "", "__proto__", " ", "[bold]x[/]", 1, True,
                                 "a\nb", "k" * 5000, ":smile:", "Block_Size", "null")


def bad_values() -> st.SearchStrategy[Any]:
    """A value from BAD_VALUES, or an arbitrary int, float or short text."""
    return st.one_of(
        st.sampled_from(BAD_VALUES),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=20),
    )


def leaf_strategy(prefixes: tuple[str, ...] = ()) -> st.SearchStrategy[Leaf]:
    leaves = [leaf for leaf in _LEAVES if not prefixes or leaf.path.startswith(prefixes)]
    return st.sampled_from(leaves)


def _refused(leaf: Leaf, value: Any) -> bool:
    if isinstance(value, Raw):
        parsed = value.parsed()
        return parsed is ... or must_refuse(leaf, parsed)
    return must_refuse(leaf, value)


@st.composite
def mutations(draw, data: dict[str, Any]) -> tuple[str, bool, tuple[dict, Any, Any] | None]:
    """Apply one mutation to `data` in place. Returns (description, must be refused, where): where is
    (mapping, key, value) as written; a later mutation may overwrite or detach it, and then the
    verdict no longer holds (broken_cases checks)."""
    how = draw(st.sampled_from(["value"] * 6 + ["unknown", "section", "nesting"]))
    if how == "value":
        leaf = draw(leaf_strategy())
        value = draw(bad_values())
        parent = set_path(data, leaf.path, value)
        where = (parent, leaf.path.split(".")[-1], value)
        return f"{leaf.path} = {_short(value)}", _refused(leaf, value), where
    if how == "unknown":
        where = draw(st.sampled_from([""] + [s.path for s in _SECTIONS]))
        key = draw(st.sampled_from(UNKNOWN_KEYS))
        node = data
        for part in where.split(".") if where else []:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        value = draw(st.sampled_from([1, "x", None, {}, [1]]))
        node[key] = value
        return f"unknown key {_short(key)} under {where or '<root>'}", True, (node, key, value)
    if how == "section":
        section: Section = draw(st.sampled_from(_SECTIONS))
        value = draw(st.sampled_from([1, "x", [], [1, 2], True, 0.5, Raw(".nan")]))
        parent = set_path(data, section.path, value)
        return f"section {section.path} = {_short(value)}", True, (parent, section.path.split(".")[-1], value)
    # a leaf written at the wrong level: one section up
    leaf = draw(leaf_strategy())
    parts = leaf.path.split(".")
    wrong = ".".join(parts[:-2] + [parts[-1]])
    known = {lf.path for lf in _LEAVES} | {s.path for s in _SECTIONS}
    if len(parts) < 2 or wrong in known:
        return "no-op", False, None
    parent = set_path(data, wrong, 1)
    return f"{leaf.path} written as {wrong}", True, (parent, parts[-1], 1)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


@st.composite
def broken_cases(draw) -> Case:
    """A valid scenario with one to three mutations, in the YAML file, run (or validated)."""
    sc, files = draw(valid_scenarios())
    notes: list[str] = []
    applied: list[tuple[dict, Any, Any]] = []
    for _ in range(draw(st.integers(1, 3))):
        note, bad, where = draw(mutations(sc))
        notes.append(note)
        if bad and where is not None:
            applied.append(where)
    # a mutation counts only while a later one has not overwritten it or replaced its section
    live = _mappings(sc)
    refused = any(id(parent) in live and key in parent and parent[key] is value
                  for parent, key, value in applied)
    argv = draw(st.sampled_from([run_argv(), run_argv(), ["validate", "s.yaml"]]))
    return Case("broken", argv, {"s.yaml": to_yaml(sc), **files}, expect="fail" if refused else "any",
                why="; ".join(notes))


@st.composite
def spec_override_cases(draw) -> Case:
    """`--set model.FIELD=VALUE` / `--set hardware.FIELD=VALUE` on inline (or catalog) specs."""
    sc = _base_scenario()
    which = draw(st.sampled_from(["model", "hardware"]))
    if draw(st.booleans()):
        sc["model"], sc["hardware"] = dict(TINY_MODEL), json.loads(json.dumps(HW_BASE))
    if which == "model":
        key = draw(st.sampled_from(MODEL_INT_FIELDS))
        value, expect = draw(st.sampled_from(MODEL_BAD))
        if value is None or key == "num_params":
            expect = "any"
    else:
        key = draw(st.sampled_from(HW_NUMERIC))
        value, expect = draw(st.sampled_from(HW_BAD))
    item = f"{which}.{key}={yaml_scalar_text(value)}"
    from kvsim.scenario import parse_value

    try:
        same_type = type(parse_value(item.partition("=")[2])) is type(value)
    except Exception:  # noqa: BLE001 - kvsim refuses the text itself: an error either way
        same_type = True
    if not same_type:
        expect = "any"  # the command line changed its type ("32" reads as 32): the table does not apply
    argv = draw(st.sampled_from([run_argv("s.yaml", "--set", item), ["validate", "s.yaml", "--set", item]]))
    return Case("override", argv, {"s.yaml": to_yaml(sc)}, expect=expect, why=item[:200])


@st.composite
def override_cases(draw) -> Case:
    """A valid scenario file plus one or two `--set KEY=VALUE` items with bad values or keys (or bad
    model / hardware fields: spec_override_cases)."""
    if draw(st.integers(0, 3)) == 0:
        return draw(spec_override_cases())
    sc, files = draw(valid_scenarios())
    sets: list[str] = []
    verdicts: dict[str, bool] = {}  # path -> must be refused; a later --set of the same key wins
    unreadable = False
    for _ in range(draw(st.integers(1, 2))):
        leaf = draw(leaf_strategy())
        value = draw(bad_values().filter(lambda v: not isinstance(v, str) or v != HUGE_TEXT))
        text = yaml_scalar_text(value).replace("\x00", "")  # a command line cannot carry NUL
        sets.append(f"{leaf.path}={text}")
        from kvsim.scenario import parse_value  # how kvsim itself reads the text

        try:
            parsed = parse_value(text)
        except Exception as exc:  # noqa: BLE001 - a KvsimError: kvsim refuses the text itself
            unreadable = unreadable or type(exc).__name__ == "KvsimError"
            parsed = ...
        verdicts[leaf.path] = parsed is not ... and must_refuse(leaf, parsed)
    refused = unreadable or any(verdicts.values())
    cmd = draw(st.sampled_from(["run", "run", "validate"]))
    argv = run_argv("s.yaml") if cmd == "run" else ["validate", "s.yaml"]
    for item in sets:
        argv += ["--set", item]
    return Case("override", argv, {"s.yaml": to_yaml(sc), **files}, expect="fail" if refused else "any",
                why="; ".join(sets)[:300])
