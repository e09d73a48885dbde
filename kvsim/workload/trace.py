"""`kind: trace`: replay of a recorded request trace.

Formats:
- azure: the Azure LLM inference 2023 CSV, header TIMESTAMP,ContextTokens,GeneratedTokens, timestamps like
  "2023-11-16 18:15:46.6805900".
- columns: any CSV with a header; `columns` maps `arrival`, `prompt` and `output` to column names. Arrival
  values are seconds (or timestamps in the azure style).
- mooncake: JSONL, one {"timestamp": ms, "input_length", "output_length", "hash_ids": [...]} per line.
  Each hash id stands for `hash_block_tokens` (512) prompt tokens and names the whole prefix up to its
  block, so the prompt becomes one segment per id: (MOONCAKE_ID_BASE + id, 512), the last one shortened so
  the lengths sum to input_length.

The first `limit` rows are read; arrivals are shifted so the earliest is 0, multiplied by `time_scale`
and sorted (stable). Rows arriving after duration_s are dropped and max_requests keeps the first ones.
Zero prompt or output lengths are raised to 1. `workload.arrival` is not used: the trace has its own times.
Content of azure and columns rows is unique to each request (segments = ()).
"""

from __future__ import annotations

import csv
import json
from datetime import date
from pathlib import Path

import numpy as np

from kvsim.errors import KvsimError
from kvsim.workload.config import TraceConfig, WorkloadConfig
from kvsim.workload.request import Request

MOONCAKE_ID_BASE = 3 << 40
AZURE_COLUMNS = {"arrival": "TIMESTAMP", "prompt": "ContextTokens", "output": "GeneratedTokens"}


def trace_requests(cfg: WorkloadConfig, rng: np.random.Generator, max_requests: int | None,
                   duration_s: float | None, base_dir: str | Path | None = None) -> list[Request]:
    """The trace's requests, rids in arrival order (see the module docstring). rng is unused."""
    tcfg = cfg.trace
    path = Path(tcfg.path)
    if not path.is_absolute() and base_dir is not None and (Path(base_dir) / path).is_file():
        path = Path(base_dir) / path  # else already resolved (load_scenario) or relative to the cwd
    if not path.is_file():
        raise KvsimError(f"{path}: trace file not found")
    if tcfg.format == "mooncake":
        arrival, prompt, output, segments = _read_mooncake(path, tcfg)
    else:
        names = AZURE_COLUMNS if tcfg.format == "azure" else _column_names(tcfg)
        arrival, prompt, output = _read_csv(path, names, tcfg.limit)
        segments = None
    if not len(arrival):
        raise KvsimError(f"{path}: trace holds no requests")
    times = np.asarray(arrival, dtype=np.float64)
    times = (times - times.min()) * tcfg.time_scale
    order = np.argsort(times, kind="stable")
    if duration_s is not None:
        order = order[times[order] <= duration_s]
    if max_requests is not None:
        order = order[:max_requests]
    prompt = np.maximum(np.asarray(prompt, dtype=np.int64), 1)[order].tolist()
    output = np.maximum(np.asarray(output, dtype=np.int64), 1)[order].tolist()
    segs = [segments[i] for i in order.tolist()] if segments is not None else [()] * len(order)
    rows = zip(times[order].tolist(), prompt, output, segs, strict=True)
    return [Request(rid=rid, arrival_s=t, prompt_len=p, output_len=o, n=cfg.n, segments=sg, source="trace")
            for rid, (t, p, o, sg) in enumerate(rows)]


def _column_names(tcfg: TraceConfig) -> dict[str, str]:
    for key in AZURE_COLUMNS:
        if key not in tcfg.columns:
            raise KvsimError(f"workload.trace.columns: missing '{key}' (map arrival, prompt and output "
                             "to CSV column names)")
    extra = sorted(set(tcfg.columns) - set(AZURE_COLUMNS))
    if extra:
        raise KvsimError(f"workload.trace.columns: unknown key '{extra[0]}' "
                         "(expected arrival, prompt, output)")
    return {key: tcfg.columns[key] for key in AZURE_COLUMNS}


def _read_csv(path: Path, names: dict[str, str],
              limit: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    texts: tuple[list[str], list[str], list[str]] = ([], [], [])
    lines: list[int] = []
    with path.open(newline="") as fh:
        reader = csv.reader(fh)
        header = [h.strip() for h in next(reader, [])]
        idx = []
        for key in ("arrival", "prompt", "output"):
            if names[key] not in header:
                raise KvsimError(f"{path}:1: no column '{names[key]}' (header: {', '.join(header)})")
            idx.append(header.index(names[key]))
        width = max(idx) + 1
        for row in reader:
            if not row:
                continue
            if len(row) < width:
                raise KvsimError(f"{path}:{reader.line_num}: expected at least {width} fields, "
                                 f"got {len(row)}")
            for col, i in zip(texts, idx, strict=True):
                col.append(row[i])
            lines.append(reader.line_num)
            if limit is not None and len(lines) >= limit:
                break
    return (_times(texts[0], lines, path, names["arrival"]),
            _counts(texts[1], lines, path, names["prompt"]),
            _counts(texts[2], lines, path, names["output"]))


def _times(texts: list[str], lines: list[int], path: Path, column: str) -> np.ndarray:
    """Vectorised parse (all plain seconds, or all timestamps); on failure a row-by-row pass names the
    first bad line."""
    try:
        values = np.array(texts, dtype=np.float64)
        if np.isfinite(values).all():
            return values
    except ValueError:
        try:
            stamps = np.array(texts, dtype="datetime64[ns]")
            if len(stamps) and not np.isnat(stamps).any():
                return (stamps - stamps.min()).astype(np.int64) / 1e9
        except ValueError:
            pass
    days: dict[str | None, int] = {}
    for text, line in zip(texts, lines, strict=True):
        _time(text.strip(), days, path, line, column)
    raise KvsimError(f"{path}: {column}: mixes plain seconds and timestamps")


def _counts(texts: list[str], lines: list[int], path: Path, column: str) -> np.ndarray:
    try:
        values = np.array(texts, dtype=np.float64)
        if (values >= 0).all() and (values == np.floor(values)).all():
            return values.astype(np.int64)
    except ValueError:
        pass
    for text, line in zip(texts, lines, strict=True):
        _count(text.strip(), path, line, column)
    raise AssertionError("unreachable: a count failed the vectorised check but not the row check")


def _time(text: str, days: dict[str | None, int], path: Path, line: int, column: str) -> float:
    """Seconds: a plain number, or a 'YYYY-MM-DD HH:MM:SS[.fraction]' timestamp counted from the first
    date seen (days maps date text to its offset in days, and None to the first date's ordinal)."""
    if ":" not in text:
        try:
            value = float(text)
            if not np.isfinite(value):
                raise ValueError
            return value
        except ValueError:
            raise KvsimError(f"{path}:{line}: {column}: bad time {text!r} (expected seconds or "
                             "'YYYY-MM-DD HH:MM:SS.fff')") from None
    try:
        day_text, _, clock = text.replace("T", " ").partition(" ")
        day = days.get(day_text)
        if day is None:
            ordinal = date.fromisoformat(day_text).toordinal()
            first = days.setdefault(None, ordinal)
            day = days[day_text] = ordinal - first
        h, m, s = clock.split(":")
        seconds = float(s)
        if not 0 <= seconds < 61 or not 0 <= int(m) < 60 or not 0 <= int(h) < 24:
            raise ValueError
        return day * 86400 + int(h) * 3600 + int(m) * 60 + seconds
    except ValueError:
        raise KvsimError(f"{path}:{line}: {column}: bad time {text!r} (expected seconds or "
                         "'YYYY-MM-DD HH:MM:SS.fff')") from None


def _count(text: str, path: Path, line: int, column: str) -> int:
    try:
        value = float(text)
        if not value >= 0 or value != int(value):
            raise ValueError
    except (ValueError, OverflowError):
        raise KvsimError(f"{path}:{line}: {column}: bad token count {text!r} (expected an integer >= 0)") \
            from None
    return int(value)


def _read_mooncake(path: Path, tcfg: TraceConfig) -> tuple[list[float], list[int], list[int],
                                                           list[tuple[tuple[int, int], ...]]]:
    arrival: list[float] = []
    prompt: list[int] = []
    output: list[int] = []
    segments: list[tuple[tuple[int, int], ...]] = []
    block = tcfg.hash_block_tokens
    with path.open() as fh:
        for line, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                rec = json.loads(text)
                ts, n_in, n_out, hashes = (rec["timestamp"], rec["input_length"], rec["output_length"],
                                           rec.get("hash_ids", []))
            except json.JSONDecodeError as exc:
                raise KvsimError(f"{path}:{line}: bad JSON ({exc.msg})") from None
            except (KeyError, TypeError) as exc:
                raise KvsimError(f"{path}:{line}: missing key {exc}") from None
            for key, value in (("input_length", n_in), ("output_length", n_out)):
                if not isinstance(value, int) or value < 0:
                    raise KvsimError(f"{path}:{line}: {key}: bad token count {value!r}")
            if not isinstance(ts, (int, float)):
                raise KvsimError(f"{path}:{line}: timestamp: bad time {ts!r} (expected milliseconds)")
            if not isinstance(hashes, list) or not all(isinstance(h, int) for h in hashes):
                raise KvsimError(f"{path}:{line}: hash_ids: expected a list of integers")
            if len(hashes) != -(-n_in // block):
                raise KvsimError(f"{path}:{line}: {len(hashes)} hash_ids for input_length {n_in} "
                                 f"(expected ceil({n_in}/{block}) = {-(-n_in // block)})")
            arrival.append(ts / 1000.0)
            prompt.append(n_in)
            output.append(n_out)
            segs = [(MOONCAKE_ID_BASE + h, block) for h in hashes]
            if segs:
                segs[-1] = (segs[-1][0], n_in - block * (len(segs) - 1))
            segments.append(tuple(segs))
            if tcfg.limit is not None and len(arrival) >= tcfg.limit:
                break
    return arrival, prompt, output, segments
