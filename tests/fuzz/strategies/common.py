"""Building blocks shared by every strategy module: catalog names, markup samples, `Raw` YAML scalars,
YAML text with them (to_yaml), dotted-path assignment (set_path), `--set` value text, the `run`
argument list, and the base and tiny scenarios the case strategies start from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from hypothesis import strategies as st

# ---------------------------------------------------------------------------------------------------
# Building blocks

SMALL_MODELS = ("llama-3-8b", "qwen2.5-7b", "mistral-7b", "llama-2-7b", "llama-3.1-8b", "deepseek-v2-lite")
BIG_GPUS = ("h100-sxm", "h200", "mi300x", "a100-80gb")
ALL_MODELS = SMALL_MODELS + ("llama-2-13b", "opt-13b", "llama-2-70b", "llama-3-70b", "qwen2.5-72b",
                             "llama-3.1-405b")
ALL_HARDWARE = BIG_GPUS + ("a100-40gb", "l40s", "cpu")
SPARSITY = ("streaming", "h2o", "snapkv", "scissorhands", "pyramidkv", "infinigen")
MARKUP = ("[bold]x[/]", "[/]", "[red]", ":smile:", "[link=http://x]y[/link]", "\\[x]", "[bold red]a",
          ":thumbs_up: ok", "[[x]]", "x[/bold]")
PASSWD_LINE = "root:x:0:0"
"""The start of /etc/passwd's first line: an error must never print it."""


@dataclass(frozen=True)
class Raw:
    """A scalar written into the YAML text verbatim (e.g. `yes`, `.NaN`, `0x10`, `!!binary aGk=`)."""

    text: str

    def parsed(self) -> Any:
        try:
            return yaml.safe_load(f"v: {self.text}")["v"]
        except (yaml.YAMLError, ValueError, OverflowError):
            return ...  # unparseable: YAML itself must be refused


def to_yaml(data: Any) -> str:
    """YAML text for `data`, with `Raw` scalars substituted verbatim."""
    raws: list[str] = []

    def swap(node: Any) -> Any:
        if isinstance(node, Raw):
            raws.append(node.text)
            return f"RAWTOKEN{len(raws) - 1}X"
        if isinstance(node, dict):
            return {swap(k): swap(v) for k, v in node.items()}
        if isinstance(node, list):
            return [swap(v) for v in node]
        return node

    text = yaml.safe_dump(swap(data), sort_keys=False, allow_unicode=True, width=2**30,
                          default_flow_style=False)
    for i in reversed(range(len(raws))):
        text = text.replace(f"RAWTOKEN{i}X", raws[i])
    return text


def set_path(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """data[a][b][c] = value for path "a.b.c", making (or replacing non-mapping) parents as mappings;
    returns the mapping the value was put in."""
    parts = path.split(".")
    node = data
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value
    return node


def _mappings(data: Any) -> set[int]:
    """ids of every mapping reachable from data."""
    seen: set[int] = set()
    stack = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, dict) and id(node) not in seen:
            seen.add(id(node))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return seen


def yaml_scalar_text(value: Any) -> str:
    """How `value` reads after `--set KEY=` (parsed as YAML by kvsim)."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, str):
        return value
    return yaml.safe_dump(value, default_flow_style=True, width=2**30).strip().removesuffix("\n...")


def run_argv(scenario: str = "s.yaml", *extra: str) -> list[str]:
    return ["run", scenario, "--out", "out", "--no-progress", *extra]


# The scenario most hand-built cases start from: sections as keyword arguments (`a__b` for a.b)
def _base_scenario(**sections: Any) -> dict[str, Any]:
    sc: dict[str, Any] = {"model": "llama-3-8b", "hardware": "h100-sxm",
                          "workload": {"kind": "synthetic", "prompt_len": {"dist": "fixed", "value": 64},
                                       "output_len": {"dist": "fixed", "value": 16}},
                          "simulation": {"requests": 10}}
    for path, value in sections.items():
        set_path(sc, path.replace("__", "."), value)
    return sc


# The tiny scenario the command-line, --out and markup cases run
TINY_SCENARIO = to_yaml({"model": "llama-3-8b", "hardware": "h100-sxm", "simulation": {"requests": 3},
                         "workload": {"prompt_len": {"dist": "fixed", "value": 64},
                                      "output_len": {"dist": "fixed", "value": 8}}})


def small_scenario(requests: int = 4, **sections: Any) -> dict[str, Any]:
    """The scenario the newer surfaces' cases start from (plan, sweep, fleets, tiers, layer-group models,
    KV precision, SLO and pricing): `requests` requests of 64 prompt and 8 output tokens, a few ms to run;
    sections as keyword arguments (`a__b` for a.b)."""
    sc: dict[str, Any] = {"model": "llama-3-8b", "hardware": "h100-sxm",
                          "workload": {"kind": "synthetic", "prompt_len": {"dist": "fixed", "value": 64},
                                       "output_len": {"dist": "fixed", "value": 8}},
                          "simulation": {"requests": requests}}
    for path, value in sections.items():
        set_path(sc, path.replace("__", "."), value)
    return sc


def pick(draw, pool: tuple[tuple[Any, bool | None], ...], bad: bool | None = None) -> tuple[Any, bool]:
    """A (value, verdict) of a pool of them; verdict True when the value alone must make the case fail.
    bad=False draws only values that need not fail, bad=True only values that must."""
    if bad is not None:
        pool = tuple(item for item in pool if (item[1] is True) == bad) or pool
    value, verdict = draw(st.sampled_from(pool))
    return value, verdict is True
