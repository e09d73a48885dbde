"""The scenario schema as a flat list of leaves, read from the pydantic models, and the rule that says
whether a value must be refused at a leaf.

Reading the leaves from `kvsim.scenario.Scenario` (rather than a hand-kept list) keeps the fuzz suite
in step with the schema as keys are added. `must_refuse(leaf, value)` is deliberately conservative: it
says True only when no reading of the schema could accept the value (a NaN rate, `true` as a block size,
a negative count, a string where a number goes, a value outside a declared bound). Everything else is
"either way is fine, just keep the contract".
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

_SKIP = {"model", "hardware", "mix", "columns", "sources"}
"""Fields with their own strategies (model, hardware, mix) or free-form mappings."""
_BOOL_TEXT = {"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"}


@dataclass(frozen=True)
class Leaf:
    """One scalar key: its dotted path, kind (int, float, bool, str, literal, other), the literal's
    choices, bounds (lo/hi, strict or not) and whether null is allowed."""

    path: str
    kind: str
    choices: tuple[Any, ...] = ()
    lo: float | None = None
    lo_strict: bool = False
    hi: float | None = None
    hi_strict: bool = False
    nullable: bool = False


@dataclass(frozen=True)
class Section:
    """A nested model (kv, workload.arrival, workload.prompt_len, ...): replacing it by a scalar or a
    list must be refused."""

    path: str
    nullable: bool = False


def _unwrap(annotation: Any) -> tuple[Any, bool, list[Any]]:
    """(inner type, nullable, extra metadata) of Optional[...] / Annotated[...] / X | None."""
    nullable = False
    meta: list[Any] = []
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            args = typing.get_args(annotation)
            annotation, meta = args[0], meta + list(args[1:])
            continue
        if origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            nullable = nullable or len(args) < len(typing.get_args(annotation))
            if len(args) == 1:
                annotation = args[0]
                continue
            return annotation, nullable, meta
        return annotation, nullable, meta


def _bounds(metadata: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in metadata:
        for attr in ("metadata",):  # a FieldInfo nested in Annotated carries its own constraints
            if hasattr(m, attr) and isinstance(getattr(m, attr), list):
                out.update(_bounds(getattr(m, attr)))
        if getattr(m, "ge", None) is not None:
            out.update(lo=float(m.ge), lo_strict=False)
        if getattr(m, "gt", None) is not None:
            out.update(lo=float(m.gt), lo_strict=True)
        if getattr(m, "le", None) is not None:
            out.update(hi=float(m.le), hi_strict=False)
        if getattr(m, "lt", None) is not None:
            out.update(hi=float(m.lt), hi_strict=True)
    return out


def walk(model: type[BaseModel], prefix: str = "") -> tuple[list[Leaf], list[Section]]:
    """Every leaf and section below `model` (recursively), skipping _SKIP fields."""
    leaves: list[Leaf] = []
    sections: list[Section] = []
    for name, info in model.model_fields.items():
        if name in _SKIP:
            continue
        path = f"{prefix}{name}"
        inner, nullable, meta = _unwrap(info.annotation)
        bounds = _bounds(list(info.metadata) + meta)
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            sections.append(Section(path, nullable))
            sub_leaves, sub_sections = walk(inner, path + ".")
            leaves += sub_leaves
            sections += sub_sections
        elif typing.get_origin(inner) is Literal:
            leaves.append(Leaf(path, "literal", typing.get_args(inner), nullable=nullable))
        elif inner is bool:
            leaves.append(Leaf(path, "bool", nullable=nullable))
        elif inner is int:
            leaves.append(Leaf(path, "int", nullable=nullable, **bounds))
        elif inner is float:
            leaves.append(Leaf(path, "float", nullable=nullable, **bounds))
        elif inner is str:
            leaves.append(Leaf(path, "str", nullable=nullable))
        else:
            leaves.append(Leaf(path, "other", nullable=nullable))
    return leaves, sections


def scenario_schema() -> tuple[list[Leaf], list[Section]]:
    """Leaves and sections of the whole scenario (imported lazily: kvsim may be mid-edit)."""
    from kvsim.scenario import Scenario

    return walk(Scenario)


def _out_of_bounds(leaf: Leaf, number: float | int) -> bool:
    if leaf.lo is not None and (number < leaf.lo or (leaf.lo_strict and number == leaf.lo)):
        return True
    if leaf.hi is not None and (number > leaf.hi or (leaf.hi_strict and number == leaf.hi)):
        return True
    return False


def must_refuse(leaf: Leaf, value: Any) -> bool:
    """True when `value` at `leaf` must be a one-line error under any reasonable reading of the schema
    (see the module docstring)."""
    if value is None:
        return not leaf.nullable
    if leaf.kind == "other":
        return False
    if isinstance(value, (list, dict, tuple, set)):
        return True
    if leaf.kind == "str":
        return not isinstance(value, (str, bytes))
    if leaf.kind == "literal":
        return not any(type(value) is type(c) and value == c for c in leaf.choices)
    if leaf.kind == "bool":
        if isinstance(value, bool):
            return False
        if isinstance(value, (int, float)):
            return value not in (0, 1)
        if isinstance(value, str):
            return value.strip().lower() not in _BOOL_TEXT
        return True
    # int or float
    if isinstance(value, bool):
        return True
    if isinstance(value, bytes):
        return True
    if isinstance(value, str):
        try:
            number = float(value.strip().replace("_", "x"))  # "1_0" may or may not parse: not sure
        except ValueError:
            return not _maybe_numeric_text(value)
        value = number
    if not isinstance(value, (int, float)):
        return True  # a date, a set, binary data...
    if isinstance(value, float):
        if not math.isfinite(value):
            return True
        if leaf.kind == "int" and value != int(value):
            return True
    return _out_of_bounds(leaf, value)


def _maybe_numeric_text(text: str) -> bool:
    """Text a lax parser might still read as a number ('1_000', ' 12 ')."""
    stripped = text.strip().replace("_", "")
    try:
        float(stripped)
        return True
    except ValueError:
        return False
