"""Output folders: --out targets that are files, the working folder, its parent or user folders, and
earlier output folders the user added to or changed; nothing the case created may be deleted or
changed (`out_cases`, `rerun_cases`)."""

from __future__ import annotations

from typing import Any

from cases import Case, Link
from hypothesis import strategies as st

from .common import TINY_SCENARIO, run_argv

# ---------------------------------------------------------------------------------------------------
# Output folders


RERUN_COMMANDS = {
    "run": ["run", "s.yaml", "--no-progress", "--out"],
    "compare": ["compare", "s.yaml", "--vary", "kv.block_size=16,32", "--out"],
    "hitrate": ["hitrate", "s.yaml", "--out"],
}
OUTPUT_FILE = {"run": "summary.json", "compare": "compare.csv", "hitrate": "hitrate.csv"}
USER_EDITS: tuple[tuple[str, Any, str], ...] = (
    ("notes.md", "my notes\n", "fail"), ("analysis/a.py", "x = 1\n", "fail"), (".hidden", "h\n", "fail"),
    ("{output}", "edited by hand\n", "fail"), (".kvsim-manifest.json", "{not json", "fail"),
    (".kvsim-manifest.json", '{"signature": "kvsim output folder v1", "files": {"../top.txt": "0"}}', "fail"),
    (".kvsim-manifest.json", None, "fail"), ("{output}", None, "fail"), ("", None, "pass"),
)


@st.composite
def rerun_cases(draw) -> Case:
    """Write an output folder with kvsim (setup), maybe add or change something in it as a user would,
    then write into it again (same or another command): a folder kvsim wrote and nobody touched is
    replaced; anything else is refused and the user's files stay."""
    first = draw(st.sampled_from(sorted(RERUN_COMMANDS)))
    second = draw(st.sampled_from([first, first, *sorted(RERUN_COMMANDS)]))
    name, content, expect = draw(st.sampled_from(USER_EDITS))
    name = name.replace("{output}", OUTPUT_FILE[first])
    after: dict[str, Any] = {}
    if name:
        after[f"exp/prev/{name}"] = content
    if second != first and expect == "pass":
        expect = "any"  # another command's folder: replacing it or refusing are both fine
    files: dict[str, Any] = {"exp/s.yaml": TINY_SCENARIO, "top.txt": "parent's file\n"}
    target = "prev"
    if draw(st.integers(0, 3)) == 0:  # through a symlink, which must stay a symlink
        files["exp/link"] = Link("prev")
        target = "link"
    return Case("out", RERUN_COMMANDS[second] + [target], files, expect=expect, cwd="exp",
                why=f"{first} then {second} --out {target}, after: {name or 'nothing'}",
                setup=[RERUN_COMMANDS[first] + ["prev"]], after_setup=after)


@st.composite
def out_cases(draw) -> Case:
    """--out pointing at places that hold the user's files, or at an earlier output folder (rerun_cases);
    nothing the case created may be deleted or changed (data-loss), whatever the exit code."""
    if draw(st.booleans()):
        return draw(rerun_cases())
    files: dict[str, Any] = {
        "exp/s.yaml": TINY_SCENARIO, "exp/notes.md": "my notes\n", "top.txt": "parent's file\n",
        "proj/.git/config": "[core]\n", "proj/src/main.py": "print('hi')\n", "proj/summary.json": "{}\n",
        "proj/compare.csv": "mine\n", "proj/hitrate.csv": "mine\n", "proj/hitrate.png": b"\x89PNG mine",
        "oldrun/summary.json": "{}\n", "oldrun/notes.md": "analysis\n", "oldrun/analysis/a.py": "x = 1\n",
        "empty": None, "file.txt": "a file\n",
    }
    if draw(st.booleans()):
        files["linkdir"] = Link("proj")
    target = draw(st.sampled_from([".", "..", "../proj", "../oldrun", "../empty", "../file.txt", "../linkdir",
                                   "new", "../new/deeper", "../exp", "../proj/src", "notes.md",
                                   "/dev/null"]))
    cmd = draw(st.sampled_from(["run", "run", "compare", "hitrate"]))
    if cmd == "run":
        argv = run_argv("s.yaml")[:2] + ["--out", target, "--no-progress"]
    elif cmd == "compare":
        argv = ["compare", "s.yaml", "--vary", "kv.block_size=16,32", "--out", target]
    else:
        argv = ["hitrate", "s.yaml", "--out", target]
    return Case("out", argv, files, expect="any", why=f"{cmd} --out {target}", cwd="exp")
