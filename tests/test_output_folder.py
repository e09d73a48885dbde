"""kvsim/output_folder.py: kvsim creates or replaces only folders it wrote itself, and in them only the files
its manifest lists; an interrupt leaves the old output or the new one, whole. One test per data-loss case
of issue 9 (a user's folder holding a stray summary.json is left untouched, ...)."""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from kvsim import interrupts
from kvsim import output_folder as of
from kvsim.errors import KvsimError
from kvsim.interrupts import Terminated, restore_signals
from kvsim.output_folder import MANIFEST, OutputFolder


def write(folder: OutputFolder, **files: str) -> Path:
    with folder as tmp:
        for name, text in files.items():
            (tmp / name).write_text(text)
    return folder.path


def tree(path: Path) -> dict[str, str]:
    """Every file under path (dotfiles included) -> its text, for before/after comparisons."""
    return {str(p.relative_to(path)): p.read_text() for p in sorted(path.rglob("*")) if p.is_file()}


def siblings(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}."))


@pytest.fixture(autouse=True)
def _cwd(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)


def test_new_folder_gets_the_files_and_a_manifest(tmp_path):
    out = write(OutputFolder(tmp_path / "out", "run"), **{"summary.json": "{}\n", "report.md": "r"})
    assert sorted(os.listdir(out)) == [MANIFEST, "report.md", "summary.json"]
    doc = json.loads((out / MANIFEST).read_text())
    assert doc["signature"] == of.SIGNATURE and doc["command"] == "run"
    assert doc["files"]["report.md"] == of.file_sha256(out / "report.md")
    assert siblings(out) == []


def test_rerun_replaces_its_own_folder_whole(tmp_path):
    out = write(OutputFolder(tmp_path / "out", "run"), **{"a.txt": "1", "b.txt": "1"})
    write(OutputFolder(out, "run"), **{"a.txt": "2"})
    assert tree(out) == {"a.txt": "2", MANIFEST: (out / MANIFEST).read_text()}
    assert siblings(out) == []


@pytest.mark.parametrize("layout", [
    {".git/HEAD": "ref", "src/main.py": "code", "summary.json": "{}"},             # a project folder
    {".bashrc": "rc", ".ssh/id": "key", "summary.json": "{}", "docs/x.md": "d"},  # a home-like folder
    {"summary.json": "{}", "requests.parquet": "p"},                               # an old-style output
])
def test_a_folder_kvsim_did_not_write_is_left_untouched(tmp_path, layout):
    target = tmp_path / "target"
    for name, text in layout.items():
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_text(text)
    before = tree(target)
    with pytest.raises(KvsimError, match="not a kvsim output folder"):
        OutputFolder(target, "run")
    assert tree(target) == before and siblings(target) == []


def test_user_files_added_to_an_output_folder_block_its_replacement(tmp_path):
    out = write(OutputFolder(tmp_path / "out", "run"), **{"summary.json": "{}"})
    (out / "notes.md").write_text("mine")
    (out / "analysis").mkdir()
    (out / "analysis" / "fig.py").write_text("mine too")
    before = tree(out)
    with pytest.raises(KvsimError, match="'analysis', which kvsim did not write"):
        OutputFolder(out, "run")
    assert tree(out) == before


def test_a_changed_output_file_blocks_the_replacement(tmp_path):
    out = write(OutputFolder(tmp_path / "out", "run"), **{"report.md": "kvsim's"})
    (out / "report.md").write_text("edited by the user")
    with pytest.raises(KvsimError, match="'report.md' was changed after kvsim wrote it"):
        OutputFolder(out, "run")
    assert (out / "report.md").read_text() == "edited by the user"


def test_a_forged_manifest_is_not_kvsims(tmp_path):
    target = tmp_path / "t"
    target.mkdir()
    (target / MANIFEST).write_text('{"files": {}}')
    (target / "x").write_text("keep")
    with pytest.raises(KvsimError, match="is not one kvsim wrote"):
        OutputFolder(target, "run")


def test_never_the_working_directory_or_a_parent_of_it(tmp_path):
    cwd = Path.cwd()
    (cwd / "scenario.yaml").write_text("name: x\n")
    for out in (".", "..", str(tmp_path)):
        with pytest.raises(KvsimError, match="working directory or a parent"):
            OutputFolder(out, "run")
    assert (cwd / "scenario.yaml").read_text() == "name: x\n"


def test_never_a_folder_holding_an_input(tmp_path):
    exp = tmp_path / "data" / "exp"
    exp.mkdir(parents=True)
    scenario = exp / "scenario.yaml"
    scenario.write_text("name: x\n")
    with pytest.raises(KvsimError, match="would contain the input scenario.yaml"):
        OutputFolder(exp, "run", protect=[scenario])
    with pytest.raises(KvsimError, match="would contain the input"):
        OutputFolder(tmp_path / "data", "run", protect=[scenario])
    assert scenario.read_text() == "name: x\n"


def test_a_file_in_place_of_the_folder_is_refused(tmp_path):
    notes = tmp_path / "notes.csv"
    notes.write_text("mine")
    with pytest.raises(KvsimError, match="exists and is not a folder"):
        OutputFolder(notes, "calibrate")
    assert notes.read_text() == "mine"


def test_unwritable_parent_is_refused_before_writing(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    with pytest.raises(KvsimError, match="permission denied"):
        OutputFolder(locked / "out", "run")


def test_permissions_of_the_folder_are_kept(tmp_path):
    out = write(OutputFolder(tmp_path / "out", "run"), **{"a": "1"})
    os.chmod(out, 0o750)
    write(OutputFolder(out, "run"), **{"a": "2"})
    assert out.stat().st_mode & 0o777 == 0o750
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o700)
    os.chmod(empty, 0o711)
    write(OutputFolder(empty, "run"), **{"a": "1"})
    assert empty.stat().st_mode & 0o777 == 0o711


def test_a_symlinked_output_folder_stays_a_symlink(tmp_path):
    real = write(OutputFolder(tmp_path / "real", "run"), **{"a": "1"})
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    write(OutputFolder(link, "run"), **{"a": "2"})
    assert link.is_symlink() and (link / "a").read_text() == "2"
    assert (real / "a").read_text() == "2"


def test_failure_while_writing_keeps_the_old_output(tmp_path):
    out = write(OutputFolder(tmp_path / "out", "run"), **{"a": "old"})
    with pytest.raises(RuntimeError, match="plotting failed"), OutputFolder(out, "run") as tmp:
        (tmp / "a").write_text("new")
        raise RuntimeError("plotting failed")
    assert (out / "a").read_text() == "old" and siblings(out) == []


def test_sigterm_while_writing_removes_the_temporary_folder(tmp_path):
    out = write(OutputFolder(tmp_path / "out", "run"), **{"a": "old"})
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with pytest.raises(Terminated), OutputFolder(out, "run") as tmp:
            (tmp / "a").write_text("new")
            os.kill(os.getpid(), signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is restored
    finally:
        signal.signal(signal.SIGTERM, before)
    assert (out / "a").read_text() == "old" and siblings(out) == []


@pytest.fixture
def other_threads():
    """Threads besides the main one (as pyarrow and BLAS start): the kernel may hand a signal to any."""
    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    yield
    stop.set()


@pytest.mark.parametrize("sig, exc", [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)])
@pytest.mark.parametrize("attempt", range(5))
def test_a_signal_during_the_swap_waits_until_the_new_output_is_whole(tmp_path, monkeypatch, other_threads,
                                                                      sig, exc, attempt):
    out = write(OutputFolder(tmp_path / "out", "run"), **{"a": "old", "b": "old"})
    remove = of._remove_own

    def interrupted_removal(old: Path) -> None:
        os.kill(os.getpid(), sig)  # arrives while the old folder is being removed
        remove(old)

    monkeypatch.setattr(of, "_remove_own", interrupted_removal)
    with pytest.raises(exc), OutputFolder(out, "run") as tmp:
        (tmp / "a").write_text("new")
    assert tree(out) == {"a": "new", MANIFEST: (out / MANIFEST).read_text()}
    assert siblings(out) == []


def test_a_folder_changed_during_the_run_is_checked_again(tmp_path):
    out = write(OutputFolder(tmp_path / "out", "run"), **{"a": "old"})
    with pytest.raises(KvsimError, match="'late.txt', which kvsim did not write"), \
            OutputFolder(out, "run") as tmp:
        (tmp / "a").write_text("new")
        (out / "late.txt").write_text("written by the user while kvsim ran")
    assert (out / "late.txt").exists() and (out / "a").read_text() == "old" and siblings(out) == []


@pytest.mark.parametrize("sig, exc", [(signal.SIGTERM, Terminated), (signal.SIGINT, KeyboardInterrupt)])
def test_a_signal_right_after_the_temporary_folder_is_made_removes_it(tmp_path, monkeypatch, sig, exc):
    """The window between mkdtemp creating the folder and kvsim recording it (an interrupted run left an
    empty .out.tmp-* in about 3 of 10 tries): the signal is held until the folder is recorded, then removes
    it."""
    made = of.tempfile.mkdtemp

    def mkdtemp_then_signal(*args, **kwargs):
        path = made(*args, **kwargs)
        os.kill(os.getpid(), sig)
        return path

    monkeypatch.setattr(of.tempfile, "mkdtemp", mkdtemp_then_signal)
    out = tmp_path / "out"
    with pytest.raises(exc), OutputFolder(out, "run") as tmp:
        (tmp / "a").write_text("never written")
    assert siblings(out) == [] and not out.exists() and not of._live_temps


def test_the_temporary_folder_carries_kvsims_marker_and_the_output_does_not(tmp_path):
    out = tmp_path / "out"
    with OutputFolder(out, "run") as tmp:
        assert tmp.name.startswith(f".out.tmp-{os.getpid()}-")
        marker = json.loads((tmp / of.TEMP_MARKER).read_text())
        assert marker["signature"] == of.TEMP_SIGNATURE and marker["pid"] == os.getpid()
        assert marker["pid_ns"] == of._pid_namespace()
        (tmp / "a").write_text("new")
    assert sorted(os.listdir(out)) == [MANIFEST, "a"] and not of._live_temps


def test_at_exit_kvsim_removes_the_temporary_folders_it_still_holds(tmp_path):
    """The last resort for a signal that lands between two statements of the cleanup: every temporary
    folder not yet renamed into place or removed is removed when the process exits."""
    folder = OutputFolder(tmp_path / "out", "run")
    tmp = folder.__enter__()  # (never exited: as if a signal stopped the cleanup)
    (tmp / "summary.json").write_text("{}")
    assert of._live_temps == {tmp}
    of._remove_live_temps()
    assert not tmp.exists() and not of._live_temps
    restore_signals(folder._old_signals)


def _dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    return int(proc.stdout)


def test_a_later_run_removes_stale_temporary_folders_of_dead_kvsim_processes_only(tmp_path):
    """What a SIGKILL leaves (.out.tmp-PID-*) is removed by the next run into the same --out when the
    process is gone and the folder is kvsim's (its marker, or empty and old); nothing else is touched."""
    dead, host = _dead_pid(), of.socket.gethostname()

    def temp(name: str, marker: dict | None = None, files: tuple[str, ...] = (), age_s: float = 0) -> Path:
        d = tmp_path / name
        d.mkdir()
        if marker is not None:
            (d / of.TEMP_MARKER).write_text(json.dumps(marker))
        for f in files:
            (d / f).write_text("x")
        if age_s:
            t = os.stat(d).st_mtime - age_s
            os.utime(d, (t, t))
        return d

    mark = {"signature": of.TEMP_SIGNATURE, "pid": dead, "host": host, "pid_ns": of._pid_namespace()}
    stale = [temp(f".out.tmp-{dead}-aaaa", mark, ("summary.json",)),
             temp(f".out.tmp-{dead}-bbbb", age_s=3600)]
    kept = [temp(f".out.tmp-{os.getpid()}-cccc", {**mark, "pid": os.getpid()}, ("a",)),  # alive
            temp(f".out.tmp-{dead}-dddd", None, ("notes.md",)),  # no marker: not known to be kvsim's
            temp(f".out.tmp-{dead}-eeee", {**mark, "host": "elsewhere"}, ("a",)),  # another host's pid
            temp(f".out.tmp-{dead}-ffff", {**mark, "pid": dead + 1}, ("a",)),  # marker of another pid
            temp(f".out.tmp-{dead}-iiii", {**mark, "pid_ns": "pid:[1]"}, ("a",)),  # another container's
            temp(f".out.tmp-{dead}-gggg"),  # empty but just made
            temp(".out.tmp-notes", None, ("a",), age_s=3600),  # not kvsim's name
            temp(f".other.tmp-{dead}-hhhh", mark, ("a",))]  # another output folder's
    out = write(OutputFolder(tmp_path / "out", "run"), a="new")
    assert (out / "a").read_text() == "new"
    assert not any(d.exists() for d in stale) and all(d.exists() for d in kept)
    assert (kept[1] / "notes.md").exists()


def test_interrupting_kvsim_run_at_many_points_leaves_no_temporary_folder(tmp_path):
    """A real `kvsim run` signalled 20 times: SIGINT or SIGTERM (or both), at staggered delays after its
    temporary folder appears (while it is being made, written, swapped). Every try leaves the old output
    or the new one, whole, no .out.tmp-* / .out.old-* sibling and no traceback."""
    import subprocess
    import sys
    import time

    scenario = tmp_path / "tiny.yaml"
    scenario.write_text("simulation: {requests: 5}\n")
    for i in range(20):
        work = tmp_path / f"try{i}"
        work.mkdir()
        out = work / "out"
        argv = [sys.executable, "-m", "kvsim.cli", "run", str(scenario), "--out", str(out)]
        proc = subprocess.Popen([*argv, "--no-plots"] if i % 2 else argv, cwd=work,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        while proc.poll() is None and not siblings(out):
            time.sleep(0.0005)
        time.sleep((i % 10) * 0.003)
        for sig in ((signal.SIGINT, signal.SIGTERM) if i % 5 == 4 else
                    (signal.SIGTERM,) if i % 3 == 0 else (signal.SIGINT,)):
            if proc.poll() is None:
                proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
        assert siblings(out) == [], (i, err)
        assert "Traceback" not in err, (i, err)
        assert proc.returncode in (0, 130, 143, -signal.SIGINT, -signal.SIGTERM), (i, proc.returncode, err)
        if out.exists():
            assert {"summary.json", MANIFEST} <= set(os.listdir(out)), i


def test_an_empty_stale_folder_that_gains_a_file_after_the_check_is_kept(tmp_path, monkeypatch):
    """An empty, old .out.tmp-PID-* is removed with rmdir, not rmtree: a file put there between the check
    and the removal (by whoever made the folder) is never deleted."""
    stale = tmp_path / f".out.tmp-{_dead_pid()}-aaaa"
    stale.mkdir()
    t = os.stat(stale).st_mtime - 3600
    os.utime(stale, (t, t))
    checked = of._abandoned

    def check_then_write(folder, pid):
        verdict = checked(folder, pid)
        (folder / "notes.md").write_text("written just after the check")
        return verdict

    monkeypatch.setattr(of, "_abandoned", check_then_write)
    assert of.remove_stale_temps(tmp_path, "out") == []
    assert (stale / "notes.md").read_text() == "written just after the check"


def test_a_temporary_folder_whose_marker_cannot_be_written_is_removed_at_once(tmp_path, monkeypatch):
    """mkdtemp succeeded but writing the marker failed (a full disk): the error is the one line, and the
    folder, which the caller never learned of, is gone now, not only when the process exits."""
    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(of.Path, "write_text", full_disk)
    out = tmp_path / "out"
    with pytest.raises(KvsimError, match="cannot create output folder: No space left on device"):
        OutputFolder(out, "run").__enter__()
    assert siblings(out) == [] and not of._live_temps


def test_a_signal_during_the_exit_cleanup_ends_the_process_without_a_traceback(tmp_path):
    """A SIGINT that lands while the atexit cleanup removes a temporary folder waits for the removal, then
    ends the process by the signal (it printed 'Exception ignored in atexit callback' and a traceback)."""
    import subprocess
    import sys

    tmp = tmp_path / ".out.tmp-1-x"
    tmp.mkdir()
    code = (
        "import os, shutil, signal\n"
        "import kvsim.output_folder as of\n"
        "real = shutil.rmtree\n"
        "def rmtree(path, **kw):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    real(path, **kw)\n"
        "shutil.rmtree = rmtree\n"
        f"of._live_temps.add(of.Path({str(tmp)!r}))\n"
        "of._remove_live_temps()\n"
        "print('not reached')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout, proc.stderr) == (-signal.SIGINT, "", "")
    assert not tmp.exists()


def test_an_interrupt_swallowed_while_the_run_went_on_is_raised_before_the_swap(tmp_path):
    """The last point a swallowed interrupt is raised (if SIGALRM has not raised it yet): before the new
    output replaces the old, so the old output stays."""
    out = write(OutputFolder(tmp_path / "out", "run"), a="old")
    with pytest.raises(Terminated), OutputFolder(out, "run") as tmp:
        (tmp / "a").write_text("new")
        interrupts._swallowed.append(signal.SIGTERM)  # (as _hold_swallowed keeps it)
    assert (out / "a").read_text() == "old" and siblings(out) == [] and not interrupts._swallowed
