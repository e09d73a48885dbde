"""report.html (kvsim/metrics/html.py): one self-contained page per run, deterministic, user text escaped;
opened in headless Chromium (Debian's chromium, installed by .ci/run where apt can) and screenshot."""

from __future__ import annotations

import re
import shutil
import subprocess
import zlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvsim.cli import app
from kvsim.metrics import html

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars")


def test_page_escapes_user_text_and_embeds_images(tmp_path):
    png = tmp_path / "a.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\nxyz")
    page = html.page("<b>name</b>", "lead & more", [html.table(["k", "v"], [["<script>", 1]]),
                                                    html.image(png, "a plot")])
    assert "<b>name</b>" not in page and "&lt;b&gt;name&lt;/b&gt;" in page
    assert "&lt;script&gt;" in page and "<script>" not in page
    assert 'src="data:image/png;base64,iVBORw0KGgp4eXo="' in page  # base64 of the bytes above
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("html") / "out"
    res = CliRunner().invoke(app, ["run", "--set", "simulation.requests=120", "--set", "name=<i>chat</i>",
                                   "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def test_run_writes_a_self_contained_page(run_folder):
    page = (run_folder / "report.html").read_text(encoding="utf-8")
    assert "&lt;i&gt;chat&lt;/i&gt;" in page and "<i>chat</i>" not in page
    assert page.count("data:image/png;base64,") == 4  # kv usage, concurrency, latency CDFs, over time
    assert "offered requests/s" in page and "Scenario (resolved)" in page
    assert not re.search(r'src="(?!data:)', page)  # no file beside it is needed


def test_page_is_the_same_on_rerun(run_folder, tmp_path):
    again = tmp_path / "again"
    res = CliRunner().invoke(app, ["run", "--set", "simulation.requests=120", "--set", "name=<i>chat</i>",
                                   "--out", str(again)])
    assert res.exit_code == 0
    assert (again / "report.html").read_bytes() == (run_folder / "report.html").read_bytes()


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium here: .ci/run installs Debian's chromium with apt-get where it can "
                "(apt-get install chromium)")


def _png_size_and_variety(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct byte values in the decoded image data): a blank page has few."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    chunks, i = [], 8
    while i < len(data):
        n = int.from_bytes(data[i:i + 4], "big")
        if data[i + 4:i + 8] == b"IDAT":
            chunks.append(data[i + 8:i + 8 + n])
        i += 12 + n
    raw = zlib.decompress(b"".join(chunks))
    return width, height, len(set(raw[: 2_000_000]))


def test_page_renders_in_headless_chromium(run_folder, tmp_path):
    browser = _chromium()
    shot = tmp_path / "report.png"
    url = (run_folder / "report.html").resolve().as_uri()
    res = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                          "--window-size=1280,2400", f"--screenshot={shot}", url],
                         capture_output=True, text=True, timeout=120)
    assert shot.is_file(), res.stderr[-2000:]
    width, height, variety = _png_size_and_variety(shot)
    assert (width, height) == (1280, 2400) and variety > 50  # text, tables and plots drawn, not blank
    dom = subprocess.run([browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile2'}",
                          "--dump-dom", url], capture_output=True, text=True, timeout=120).stdout
    assert "Key figures" in dom and dom.count("<img") == 4
