"""kvsim/errors.py: how error lines quote user input (excerpt), how echoed text stays inert (printable), and
the --jobs limits the command line shares with the Python API."""

from __future__ import annotations

from kvsim.errors import excerpt, printable


def test_excerpt_is_short_escaped_and_marks_the_cut():
    assert excerpt("abc") == "'abc'"
    assert excerpt("root:x:0:0:root:/root:/bin/bash\nnext line", 12) == "'root:x:0:0:r…'"
    assert excerpt("a\nb\x1b") == "'a\\nb\\x1b'"
    assert excerpt(1e308) == "1e+308"
    assert excerpt(list(range(100)), 10) == "[0, 1, 2, …"


def test_printable_escapes_control_and_format_characters_only():
    assert printable("plain name, é 日本") == "plain name, é 日本"
    assert printable("a\x1b[31mred\x07") == "a\\x1b[31mred\\x07"
    assert printable("x\u202ey") == "x\\u202ey"  # a right-to-left override cannot hide text
    assert printable(3) == "3"


def test_the_command_lines_jobs_limits_are_the_apis():
    """One source for each --jobs limit: run, compare and plan take MAX_JOBS, sweep MAX_SWEEP_JOBS."""
    import typer

    from kvsim.cli import app
    from kvsim.errors import MAX_JOBS, MAX_SWEEP_JOBS

    commands = typer.main.get_command(app).commands
    limits = {name: next(p.max for p in commands[name].params if p.name == "jobs")
              for name in ("run", "compare", "plan", "sweep")}
    assert limits == {"run": MAX_JOBS, "compare": MAX_JOBS, "plan": MAX_JOBS, "sweep": MAX_SWEEP_JOBS}
    assert (MAX_JOBS, MAX_SWEEP_JOBS) == (256, 1024)
