"""report.html: one self-contained page per run, compare, plan and sweep, to open in a browser or send to a
colleague. Tables, the plots embedded as data URIs (no file beside it is needed) and the scenario. The
bytes depend only on what is shown (no date, no host), so a rerun writes the same page. Every text that
comes from the user (names, keys, values) is escaped."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable
from pathlib import Path

STYLE = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1em; color: #1d2327; line-height: 1.4; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.15em; margin-top: 1.6em;
     border-bottom: 1px solid #d0d7de; padding-bottom: 0.2em; }
p.lead { color: #57606a; margin-top: 0; }
table { border-collapse: collapse; font-size: 0.88em; margin: 0.6em 0; }
th, td { border: 1px solid #d0d7de; padding: 0.25em 0.6em; text-align: right; vertical-align: top; }
th { background: #f6f8fa; } td:first-child, th:first-child { text-align: left; }
tr:nth-child(even) td { background: #fbfcfd; }
img { max-width: 100%; border: 1px solid #eaeef2; margin: 0.4em 0; }
pre { background: #f6f8fa; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
.answer { font-size: 1.1em; font-weight: 600; background: #eef9f1; border-left: 4px solid #2a9d8f;
          padding: 0.5em 0.8em; }
""".strip()


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def page(title: str, lead: str, blocks: Iterable[str]) -> str:
    """A whole HTML document: the title, a lead line under it, then the blocks (already HTML)."""
    body = "\n".join(blocks)
    head = f'<meta charset="utf-8">\n<title>{esc(title)}</title>\n<style>\n{STYLE}\n</style>'
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n{head}\n</head>\n<body>\n<h1>{esc(title)}</h1>\n'
            f'<p class="lead">{esc(lead)}</p>\n{body}\n</body>\n</html>\n')


def heading(text: str) -> str:
    return f"<h2>{esc(text)}</h2>"


def paragraph(text: str, css: str = "") -> str:
    cls = f' class="{esc(css)}"' if css else ""
    return f"<p{cls}>{esc(text)}</p>"


def table(header: list[str], rows: Iterable[Iterable[object]]) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "\n".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def image(path: Path, alt: str) -> str:
    """A PNG embedded in the page (a data URI), so the page needs no file beside it."""
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return f'<figure><img alt="{esc(alt)}" src="data:image/png;base64,{data}"></figure>'


def preformatted(text: str) -> str:
    return f"<pre>{esc(text)}</pre>"


def bullets(items: Iterable[str]) -> str:
    return "<ul>\n" + "\n".join(f"<li>{esc(i)}</li>" for i in items) + "\n</ul>"
