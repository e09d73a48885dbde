"""The import direction of docs/architecture.md holds, and the doc names only files that exist.

Every module under kvsim/ is parsed with `ast`; every import of a kvsim module counts, at any depth
(module level, inside functions, under `if TYPE_CHECKING:`). Each module belongs to one unit (a package,
the kvcache.sparsity sub-package, or a top-level module); a unit may import itself, the package root
`kvsim` (its `__version__`) and what ALLOWED lists for it. An entry in ALLOWED is a dotted prefix: a whole
unit (`kvsim.specs`) or one module of it (`kvsim.metrics.recorder`).

KNOWN_VIOLATIONS lists, by file and imported module, the imports that go against the documented
direction today. They are tolerated, not endorsed: docs/architecture.md lists them too, and an entry
that no longer occurs fails the test so it is removed. Do not add to it to make a new import pass;
move the code to the room whose rules allow the import, or change the rule here and in the doc together.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "kvsim"
DOC = ROOT / "docs" / "architecture.md"

E, IN, SC, OF = "kvsim.errors", "kvsim.inputs", "kvsim.schema", "kvsim.output_folder"

# unit -> what it may import besides itself and the root package `kvsim`
ALLOWED: dict[str, set[str]] = {
    # leaf utilities: anyone may import them; they import (almost) nothing
    "kvsim.errors": set(),
    "kvsim.native": set(),  # compiled or Python, decided at import (kvsim/__init__.py installs it first)
    "kvsim.inputs": {E},
    "kvsim.schema": {E, IN},
    "kvsim.interrupts": set(),
    "kvsim.output_folder": {E, "kvsim.interrupts"},
    "kvsim.aliases": {E},
    # the bottom rooms
    "kvsim.specs": {E, IN},
    "kvsim.workload": {E, IN, SC},
    "kvsim.kvcache.sparsity": {E, IN, SC},
    "kvsim.kvcache": {E, IN, SC, "kvsim.specs", "kvsim.workload.request"},
    "kvsim.cost": {E, IN, "kvsim.specs"},
    # feature rooms: a scenario section (pydantic) and the feature's own arithmetic, below the engine
    "kvsim.speculative": {E, IN, SC, "kvsim.specs"},
    "kvsim.lora": {E, IN, SC, "kvsim.specs", "kvsim.workload.request"},
    # the scenario schema gathers the config models of the rooms below it, and its choices from the registry
    "kvsim.scenario": {E, IN, SC, "kvsim.aliases", "kvsim.specs", "kvsim.workload",
                       "kvsim.kvcache.sparsity.config", "kvsim.registry",
                       "kvsim.speculative", "kvsim.lora"},
    # the JSON Schema of a scenario file, from the schema models (kvsim schema)
    "kvsim.scenario_schema": {E, IN, SC, "kvsim.aliases", "kvsim.scenario"},
    # metrics: recorder, summary, report, plots, hit-rate model; never the engine
    "kvsim.metrics": {E, IN, SC, OF, "kvsim.specs", "kvsim.workload", "kvsim.kvcache",
                      "kvsim.kvcache.sparsity", "kvsim.speculative", "kvsim.lora"},
    # the engine wires everything below it; of metrics only the recorder, the tables it hands over and the
    # per-request SLO test
    "kvsim.engine": {E, IN, SC, "kvsim.specs", "kvsim.workload", "kvsim.kvcache", "kvsim.kvcache.sparsity",
                     "kvsim.cost", "kvsim.scenario", "kvsim.metrics.recorder", "kvsim.metrics.run_tables",
                     "kvsim.metrics.slo",
                     "kvsim.engine.fleet.roles", "kvsim.speculative", "kvsim.lora"},
    # replica roles: a leaf the registry reads (the schema's role names come from it)
    "kvsim.engine.fleet.roles": set(),
    # the lists of choices, below the schema: only the kvcache registries (eviction, sparsity policies)
    # and the replica roles
    "kvsim.registry": {E, IN, SC, "kvsim.kvcache.eviction", "kvsim.kvcache.sparsity", "kvsim.kvcache.tiers",
                       "kvsim.engine.fleet.roles"},
    "kvsim.sweep": {E, IN, SC, OF, "kvsim.interrupts", "kvsim.specs", "kvsim.workload", "kvsim.kvcache",
                    "kvsim.kvcache.sparsity", "kvsim.cost", "kvsim.scenario", "kvsim.engine", "kvsim.metrics",
                    "kvsim.registry", "kvsim.speculative", "kvsim.lora"},
    # calibrate runs on a GPU machine without pydantic or simpy: no scenario, engine or cost
    "kvsim.calibrate": {E, IN, OF, "kvsim.specs", "kvsim.cost.kernel_grid", "kvsim.cost.kernel_heldout"},
    # the Python API (kvsim.run, compare, sweep, plan): what the commands use, the command line excepted;
    # the root package loads it lazily
    "kvsim.api": {E, IN, SC, "kvsim.scenario", "kvsim.engine", "kvsim.metrics", "kvsim.sweep"},
    # the command line may import anything; nothing imports it
    "kvsim.cli": {E, IN, SC, OF, "kvsim.aliases", "kvsim.scenario_schema", "kvsim.specs", "kvsim.workload",
                  "kvsim.kvcache", "kvsim.kvcache.sparsity",
                  "kvsim.cost", "kvsim.scenario", "kvsim.metrics", "kvsim.engine", "kvsim.registry",
                  "kvsim.sweep", "kvsim.calibrate", "kvsim.speculative", "kvsim.lora", "kvsim.native",
                  "kvsim.interrupts"},
}

# (importing file, imported module): imports against the documented direction, as the code stands
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under kvsim/."""
    out: dict[str, Path] = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def unit_of(module: str) -> str | None:
    """The longest ALLOWED key the module falls under (None: the root package or an unknown unit)."""
    best = None
    for unit in ALLOWED:
        if _within(module, unit) and (best is None or len(unit) > len(best)):
            best = unit
    return best


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def kvsim_imports(module: str, path: Path) -> list[tuple[int, str]]:
    """(line, imported kvsim module) for every import in the file, at any depth. `from kvsim.x import y`
    counts as kvsim.x.y when y is a module, else as kvsim.x; relative imports are resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if _within(a.name, "kvsim")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = _package_of(module, path).split(".")
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([base] if base else []))
            if not _within(base, "kvsim"):
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                found.append((node.lineno, sub if sub in MODULES else base))
    return sorted(set(found))


def test_every_module_belongs_to_a_documented_unit():
    unknown = [m for m in MODULES if m != "kvsim" and unit_of(m) is None]
    assert not unknown, ("modules outside every unit of tests/test_architecture.py ALLOWED (add the unit "
                         f"and its rule here and a section in docs/architecture.md): {unknown}")


def test_import_direction():
    offending: list[str] = []
    seen_known: set[tuple[str, str]] = set()
    for module, path in MODULES.items():
        unit = unit_of(module)
        if unit is None:
            continue  # the root package, or reported by the test above
        rel = path.relative_to(ROOT).as_posix()
        for line, target in kvsim_imports(module, path):
            if target == "kvsim" or unit_of(target) == unit:
                continue
            if any(_within(target, allowed) for allowed in ALLOWED[unit]):
                continue
            if (rel, target) in KNOWN_VIOLATIONS:
                seen_known.add((rel, target))
                continue
            offending.append(f"{rel}:{line} ({unit}) imports {target}")
    stale = sorted(KNOWN_VIOLATIONS - seen_known)
    assert not offending and not stale, (
        "imports against the direction in docs/architecture.md:\n  " + "\n  ".join(offending)
        + ("\nKNOWN_VIOLATIONS entries that no longer occur (remove them here and in the doc): "
           f"{stale}" if stale else ""))


def test_import_scanner_sees_function_local_imports():
    """The scanner must see imports inside functions (kvsim/cli.py imports lazily)."""
    targets = {t for _, t in kvsim_imports("kvsim.cli", PKG / "cli.py")}
    assert {"kvsim.engine.simulation", "kvsim.scenario", "kvsim.output_folder"} <= targets


def _doc_paths() -> list[str]:
    return re.findall(r"`(kvsim/[^`\s]*?\.py)\b", DOC.read_text(encoding="utf-8"))


def test_doc_names_only_files_that_exist():
    paths = _doc_paths()
    assert paths, "docs/architecture.md names no kvsim/...py file"
    missing = sorted({p for p in paths if not (ROOT / p).is_file()})
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_doc_lists_every_module():
    named = set(_doc_paths())
    unlisted = sorted(p.relative_to(ROOT).as_posix() for p in MODULES.values()
                      if p.name != "__init__.py" and p.relative_to(ROOT).as_posix() not in named)
    assert not unlisted, f"docs/architecture.md has no line for: {unlisted}"


# ------------------------------------------------------------------ rooms inside the engine
FLEET = "kvsim.engine.fleet"
SCHEDULER_FILES = ("scheduler.py", "admission.py", "preemption.py", "block_growth.py", "window_sums.py",
                   "tier_waits.py", "decode_fast_path.py")
"""The scheduler, split by concern (docs/architecture.md, kvsim/engine/)."""


def test_the_engine_core_sees_of_the_fleet_room_only_the_hand_off_hooks_and_roles():
    """The fleet room (cluster, deployment, routers, views, roles, hand-off) sits above the scheduler:
    only simulation.py and its per-request half, request_flow.py (the wiring), reach into it; the scheduler
    takes its HandOff hooks object."""
    offending = []
    for module, path in MODULES.items():
        core = _within(module, "kvsim.engine") and not _within(module, FLEET)
        if not core or module in ("kvsim.engine.simulation", "kvsim.engine.request_flow"):
            continue
        for line, target in kvsim_imports(module, path):
            if _within(target, FLEET) and target not in (f"{FLEET}.handoff", f"{FLEET}.roles"):
                offending.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not offending, offending


def test_scheduler_files_are_small_and_set_every_attribute_in_init():
    assigned: dict[str, list[str]] = {}
    init: set[str] = set()
    for name in SCHEDULER_FILES:
        path = PKG / "engine" / name
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 450, f"{name} is over 450 lines"
        if name in ("window_sums.py", "tier_waits.py", "decode_fast_path.py"):
            continue  # classes of their own (slotted)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef):
                continue
            for node in ast.walk(fn):
                targets = node.targets if isinstance(node, ast.Assign) else (
                    [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
                for t in targets:
                    if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                            and t.value.id == "self"):
                        continue
                    if name == "scheduler.py" and fn.name == "__init__":
                        init.add(t.attr)
                    else:
                        assigned.setdefault(t.attr, []).append(f"{name}:{node.lineno}")
    late = {a: where for a, where in assigned.items() if a not in init}
    assert not late, f"Scheduler attributes first set outside Scheduler.__init__: {late}"


# ------------------------------------------------------------------ private attributes of kvcache classes
def _private_names(path: Path) -> set[str]:
    """`_x` names a module's classes define: methods, self._x assignments and __slots__ entries."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for node in ast.walk(cls):
            if (isinstance(node, ast.FunctionDef) and node.name.startswith("_")
                    and not node.name.startswith("__")):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(
                    node.value, ast.Name) and node.value.id == "self":
                names.add(node.attr)
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                      for t in node.targets):
                names |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)
                          and isinstance(c.value, str)}
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _foreign_reads(path: Path, names: set[str]) -> list[str]:
    """obj._x for x in names, where obj is not self / cls (another object's private attribute)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.relative_to(ROOT)}:{n.lineno} .{n.attr}" for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr in names
            and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))]


def test_no_module_outside_kvcache_reads_a_private_attribute_of_a_kvcache_class():
    kv_paths = [p for m, p in MODULES.items() if _within(m, "kvsim.kvcache")]
    private = set().union(*(_private_names(p) for p in kv_paths))
    own = set().union(*(_private_names(p) for m, p in MODULES.items() if not _within(m, "kvsim.kvcache")))
    names = private - own  # (a name an outside class also defines for itself is its own business)
    reads = [r for m, p in MODULES.items() if not _within(m, "kvsim.kvcache")
             for r in _foreign_reads(p, names)]
    assert not reads, f"private attributes of kvcache classes read outside kvsim/kvcache/: {reads}"


def test_no_kvcache_module_reads_another_kvcache_modules_private_attribute():
    """Inside kvcache too, a class's `_` attributes are read through `self` only outside its module (a
    subclass's hooks), never on another object: BlockPool's free list is reached through its methods."""
    kv_paths = [p for m, p in MODULES.items() if _within(m, "kvsim.kvcache")]
    names = {p: _private_names(p) for p in kv_paths}
    reads = []
    for p in kv_paths:
        others = set().union(*(n for q, n in names.items() if q != p)) - names[p]
        reads += _foreign_reads(p, others)
    assert not reads, f"private attributes of another kvcache module's classes read: {reads}"
