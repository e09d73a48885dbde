"""`kind: trace`: replay of a recorded request trace.

Formats:
- azure: the Azure LLM inference 2023 CSV, header TIMESTAMP,ContextTokens,GeneratedTokens, timestamps like
  "2023-11-16 18:15:46.6805900".
- columns: any CSV with a header; `columns` maps `arrival`, `prompt` and `output` to column names. Arrival
  values are seconds (or timestamps in the azure style). An optional `adapter` key names the column of
  each request's LoRA adapter (an empty cell: the base model); kvsim/lora/adapters.py maps the names.
- mooncake: JSONL, one {"timestamp": ms, "input_length", "output_length", "hash_ids": [...]} per line.
  Each hash id stands for `hash_block_tokens` (512) prompt tokens and names the whole prefix up to its
  block, so the prompt becomes one segment per id: (MOONCAKE_ID_BASE + id, 512), the last one shortened so
  the lengths sum to input_length.

The first `limit` rows are read; arrivals are shifted so the earliest is 0, multiplied by `time_scale`
and sorted (stable). Rows arriving after duration_s are dropped and max_requests keeps the first ones.
Zero prompt or output lengths are raised to 1. `workload.arrival` is not used: the trace has its own times.
Content of azure and columns rows is unique to each request (segments = ()).

Every field is checked and a bad one is an error naming the line: token counts are integers from 0 to
MAX_TOKENS (an integral float such as 12.0 counts; true, NaN, inf, 1e19, -2 and 5.5 do not), times are
finite, and the trace spans at most MAX_SECONDS once scaled. Lines are read with the bounds of
kvsim/workload/textfile.py (UTF-8, at most 1 MiB each); a trace holds at most MAX_REQUESTS rows (read
fewer with `limit`).
"""

from __future__ import annotations

import csv
import json
import math
import warnings
from datetime import date
from itertools import chain, islice, repeat
from operator import itemgetter
from pathlib import Path

import numpy as np

from kvsim.errors import KvsimError, excerpt
from kvsim.schema import MAX_REQUESTS, MAX_SECONDS, MAX_SEGMENTS, MAX_TOKENS
from kvsim.workload.config import TraceConfig, WorkloadConfig
from kvsim.workload.request import Request
from kvsim.workload.textfile import column_text, find_column, text_blocks, text_lines

MOONCAKE_ID_BASE = 3 << 40
MOONCAKE_MAX_HASH_ID = 1 << 40
"""Hash ids lie in [0, 2^40), so that their content ids stay in the Mooncake band."""
MAX_MOONCAKE_MS = 1e18
AZURE_COLUMNS = {"arrival": "TIMESTAMP", "prompt": "ContextTokens", "output": "GeneratedTokens"}
_ROWS_AT_ONCE = 1 << 12
"""_read_rows parses this many rows at a time."""
_DECODE = json.JSONDecoder().raw_decode
_INT_ONLY = frozenset((int,))


def trace_requests(cfg: WorkloadConfig, rng: np.random.Generator, max_requests: int | None,
                   duration_s: float | None, base_dir: str | Path | None = None) -> list[Request]:
    """The trace's requests, rids in arrival order (see the module docstring). rng is unused."""
    tcfg = cfg.trace
    path = Path(tcfg.path)
    if not path.is_absolute() and base_dir is not None and _is_file(Path(base_dir) / path):
        path = Path(base_dir) / path  # else already resolved (load_scenario) or relative to the cwd
    adapters = None
    hash_ids = None
    if tcfg.format == "mooncake":
        arrival, prompt, output, hash_ids = _read_mooncake(path, tcfg)
    else:
        names = AZURE_COLUMNS if tcfg.format == "azure" else _column_names(tcfg)
        arrival, prompt, output, adapters = _read_csv(path, names, tcfg.limit)
    if not len(arrival):
        raise KvsimError(f"{path}: trace holds no requests")
    times = _scaled(np.asarray(arrival, dtype=np.float64), tcfg.time_scale, path)
    order = np.argsort(times, kind="stable")
    if duration_s is not None:
        order = order[times[order] <= duration_s]
    if max_requests is not None:
        order = order[:max_requests]
    kept = order.tolist()
    if hash_ids is not None:  # (segments for the rows kept only)
        block = tcfg.hash_block_tokens
        segs = [_segments(hash_ids[i], prompt[i], block) for i in kept]
    else:
        segs = [()] * len(kept)
    prompt = np.maximum(np.asarray(prompt, dtype=np.int64), 1)[order].tolist()
    output = np.maximum(np.asarray(output, dtype=np.int64), 1)[order].tolist()
    rows = zip(times[order].tolist(), prompt, output, segs, strict=True)
    n = cfg.n  # (Request's fields rid, arrival_s, prompt_len, output_len, n, segments, session, after,
    # think_s, source, positionally)
    out = [Request(rid, t, p, o, n, sg, -1, -1, 0.0, "trace") for rid, (t, p, o, sg) in enumerate(rows)]
    if tcfg.format == "columns" and adapters is not None:
        for r, i in zip(out, kept, strict=True):
            r.adapter_name = adapters[i]
    return out


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long, say: text_lines reports it
        return False


def _scaled(times: np.ndarray, time_scale: float, path: Path) -> np.ndarray:
    """Times shifted to start at 0 and scaled; the span must stay within MAX_SECONDS."""
    with np.errstate(over="ignore", invalid="ignore"):
        times = (times - times.min()) * time_scale
    span = float(times.max())
    if not span <= MAX_SECONDS:
        raise KvsimError(f"{path}: the trace spans {span:g} s (times x workload.trace.time_scale), more "
                         f"than {MAX_SECONDS:g} s")
    return times


def _column_names(tcfg: TraceConfig) -> dict[str, str]:
    for key in AZURE_COLUMNS:
        if key not in tcfg.columns:
            raise KvsimError(f"workload.trace.columns: missing '{key}' (map arrival, prompt and output "
                             "to CSV column names)")
    extra = sorted(set(tcfg.columns) - set(AZURE_COLUMNS) - {"adapter"})
    if extra:
        raise KvsimError(f"workload.trace.columns: unknown key {excerpt(extra[0])} "
                         "(expected arrival, prompt, output, and optionally adapter)")
    return {key: tcfg.columns[key] for key in (*AZURE_COLUMNS, "adapter") if key in tcfg.columns}


def _read_csv(path: Path, names: dict[str, str],
              limit: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str] | None]:
    """(arrival, prompt, output, the adapter column's stripped texts or None without an adapter key)."""
    keys = ("arrival", "prompt", "output", *(("adapter",) if "adapter" in names else ()))
    try:
        fast = _read_rows(path, names, keys, limit)
    except (KvsimError, csv.Error):
        fast = None
    if fast is not None:
        picked, lines = fast
    else:
        picked, lines = _read_rows_checked(path, names, keys, limit)
    texts = tuple(list(map(itemgetter(k), picked)) for k in range(len(keys)))
    picked = None  # (free the rows)
    return (_times(texts[0], lines, path, names["arrival"]),
            _counts(texts[1], lines, path, names["prompt"]),
            _counts(texts[2], lines, path, names["output"]),
            [t.strip() for t in texts[3]] if len(keys) == 4 else None)


def _read_rows(path: Path, names: dict[str, str], keys: tuple[str, ...],
               limit: int | None) -> tuple[list[tuple[str, ...]], list[int]] | None:
    """_read_rows_checked's rows and lines for a regular file (no row over several lines, every row but
    the blank ones (skipped) wide enough, at most MAX_REQUESTS rows kept), parsed _ROWS_AT_ONCE rows at a
    time (a bound on the whole rows held); None for any other
    (or a bad one: _read_rows_checked then reads it again, and names what is wrong where)."""
    if limit is not None and limit < 1:
        return None
    reader = csv.reader(chain.from_iterable(text_blocks(path, "trace file")))
    header = next(reader, None)
    if header is None:
        return None
    header = [h.strip() for h in header]
    if any(names[key] not in header for key in keys):
        return None
    idx = [header.index(names[key]) for key in keys]
    width = max(idx) + 1
    pick = itemgetter(*idx)
    first = reader.line_num
    cap = MAX_REQUESTS if limit is None else min(limit, MAX_REQUESTS)
    picked: list[tuple[str, ...]] = []
    lines: list[int] = []
    seen = 0  # rows read after the header, blank ones too
    while len(picked) < cap:
        rows = list(islice(reader, min(_ROWS_AT_ONCE, cap - len(picked))))
        if not rows:
            break
        at = first + 1 + seen
        seen += len(rows)
        if min(map(len, rows)) < width:
            if any(row and len(row) < width for row in rows):
                return None
            kept = [i for i, row in enumerate(rows) if row]  # (blank rows skipped, as checked skips them)
            picked.extend([pick(rows[i]) for i in kept])
            lines.extend([at + i for i in kept])
        else:
            picked.extend(map(pick, rows))
            lines.extend(range(at, at + len(rows)))
    n = len(picked)
    if reader.line_num != first + seen or (n == MAX_REQUESTS and (limit is None or limit > n)):
        return None
    return picked, lines


def _read_rows_checked(path: Path, names: dict[str, str], keys: tuple[str, ...],
                       limit: int | None) -> tuple[list[tuple[str, ...]], list[int]]:
    """The picked fields (`keys`' columns) of the first `limit` non-blank rows, and their line numbers;
    any fault is an error naming the line."""
    lines: list[int] = []
    reader = csv.reader(text for _, text in text_lines(path, "trace file"))
    try:
        header = next(reader, None)
        if header is None:
            raise KvsimError(f"{path}: empty trace file (expected a header row)")
        header = [h.strip() for h in header]
        idx = [find_column(header, names[key], path) for key in keys]
        width = max(idx) + 1
        pick = itemgetter(*idx)  # (3 or 4 keys: a tuple of the row's fields)
        picked: list[tuple[str, ...]] = []
        for row in reader:
            if not row:
                continue
            if len(row) < width:
                raise KvsimError(f"{path}:{reader.line_num}: expected at least {width} fields, "
                                 f"got {len(row)}")
            picked.append(pick(row))
            lines.append(reader.line_num)
            if limit is not None and len(lines) >= limit:
                break
            if len(lines) > MAX_REQUESTS:
                raise KvsimError(f"{path}:{reader.line_num}: more than {MAX_REQUESTS:,} rows; read fewer "
                                 "with workload.trace.limit")
    except csv.Error as exc:
        raise KvsimError(f"{path}:{reader.line_num}: bad CSV ({excerpt(str(exc), 60)})") from None
    return picked, lines


def _times(texts: list[str], lines: list[int], path: Path, column: str) -> np.ndarray:
    """Vectorised parse (all plain seconds, or all timestamps); else row by row, which names the first
    bad line."""
    try:
        values = np.array(texts, dtype=np.float64)
        if np.isfinite(values).all():
            return values
    except ValueError:
        try:
            with warnings.catch_warnings():  # numpy warns (e.g. of time zones) where it half-reads a stamp
                warnings.simplefilter("error")
                stamps = np.array(texts, dtype="datetime64[ns]")
            if len(stamps) and not np.isnat(stamps).any():
                return (stamps - stamps.min()).astype(np.int64) / 1e9
        except (ValueError, OverflowError, Warning):
            pass
    days: dict[str | None, int] = {}
    values = np.array([_time(text.strip(), days, path, line, column)
                       for text, line in zip(texts, lines, strict=True)])
    if days and any(":" not in text for text in texts):
        raise KvsimError(f"{path}: {column_text(column)}: mixes plain seconds and timestamps")
    return values


def _counts(texts: list[str], lines: list[int], path: Path, column: str) -> np.ndarray:
    try:
        values = np.array(texts, dtype=np.float64)
        if ((values >= 0) & (values <= MAX_TOKENS) & (values == np.floor(values))).all():
            return values.astype(np.int64)
    except ValueError:
        pass
    return np.array([_count(text.strip(), path, line, column)
                     for text, line in zip(texts, lines, strict=True)], dtype=np.int64)


def _time(text: str, days: dict[str | None, int], path: Path, line: int, column: str) -> float:
    """Seconds: a plain number, or a 'YYYY-MM-DD HH:MM:SS[.fraction]' timestamp counted from the first
    date seen (days maps date text to its offset in days, and None to the first date's ordinal)."""
    bad = (f"{path}:{line}: {column_text(column)}: bad time {excerpt(text)} (expected a finite number of "
           "seconds or 'YYYY-MM-DD HH:MM:SS.fff')")
    if ":" not in text:
        try:
            value = float(text)
        except ValueError:
            raise KvsimError(bad) from None
        if not math.isfinite(value):
            raise KvsimError(bad)
        return value
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
        raise KvsimError(bad) from None


def _count(text: str, path: Path, line: int, column: str) -> int:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= MAX_TOKENS or value != int(value):
        raise KvsimError(f"{path}:{line}: {column_text(column)}: bad token count {excerpt(text)} "
                         f"(expected an integer from 0 to {MAX_TOKENS:,})")
    return int(value)


def _read_mooncake(path: Path,
                   tcfg: TraceConfig) -> tuple[list[float], list[int], list[int], list[list[int]]]:
    """(arrival, prompt, output, hash_ids) of every row read, each checked (_segments makes a row's
    segments)."""
    arrival: list[float] = []
    prompt: list[int] = []
    output: list[int] = []
    hash_ids: list[list[int]] = []
    block = tcfg.hash_block_tokens
    total_ids = 0
    line = 0
    for text in chain.from_iterable(text_blocks(path, "trace file")):
        line += 1
        if not text.strip():
            continue
        rec = _json_record(text, path, line)
        ts = _milliseconds(rec["timestamp"], path, line)
        n_in = _json_count(rec, "input_length", path, line)
        n_out = _json_count(rec, "output_length", path, line)
        hashes = _hash_ids(rec.get("hash_ids", []), path, line)
        if len(hashes) != -(-n_in // block):
            raise KvsimError(f"{path}:{line}: {len(hashes)} hash_ids for input_length {n_in} "
                             f"(expected ceil({n_in}/{block}) = {-(-n_in // block)})")
        total_ids += len(hashes)
        if len(arrival) >= MAX_REQUESTS or total_ids > MAX_SEGMENTS:
            raise KvsimError(f"{path}:{line}: more than {MAX_REQUESTS:,} rows or {MAX_SEGMENTS:,} hash_ids; "
                             "read fewer with workload.trace.limit")
        arrival.append(ts / 1000.0)
        prompt.append(n_in)
        output.append(n_out)
        hash_ids.append(hashes)
        if tcfg.limit is not None and len(arrival) >= tcfg.limit:
            break
    return arrival, prompt, output, hash_ids


def _segments(hashes: list[int], n_in: int, block: int) -> tuple[tuple[int, int], ...]:
    """A Mooncake row's prompt segments: one (MOONCAKE_ID_BASE + id, block) per hash id, the last one
    shortened so that the lengths sum to n_in."""
    segs = list(zip(map(MOONCAKE_ID_BASE.__add__, hashes), repeat(block)))
    if segs:
        segs[-1] = (segs[-1][0], n_in - block * (len(segs) - 1))
    return tuple(segs)


def _json_record(text: str, path: Path, line: int) -> dict:
    """One JSONL line as a mapping holding the three required keys."""
    try:  # (a line that is one document then whitespace, without json.loads' steps around the parse)
        rec, end = _DECODE(text)
        if text[end:].strip(" \t\n\r"):
            rec = None
    except Exception:
        rec = None
    if type(rec) is not dict:
        rec = _json_loads(text, path, line)
    for key in ("timestamp", "input_length", "output_length"):
        if key not in rec:
            raise KvsimError(f"{path}:{line}: missing key '{key}'")
    return rec


def _json_loads(text: str, path: Path, line: int) -> dict:
    """The line as json.loads reads it, an object; else the error naming what is wrong."""
    try:
        rec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KvsimError(f"{path}:{line}: bad JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:  # an over-long integer, deep nesting
        raise KvsimError(f"{path}:{line}: bad JSON ({excerpt(str(exc), 60)})") from None
    if not isinstance(rec, dict):
        raise KvsimError(f"{path}:{line}: expected a JSON object, got {type(rec).__name__}")
    return rec


def _milliseconds(ts: object, path: Path, line: int) -> float:
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not abs(ts) <= MAX_MOONCAKE_MS:
        raise KvsimError(f"{path}:{line}: timestamp: bad time {excerpt(ts)} (expected a finite number of "
                         f"milliseconds, at most {MAX_MOONCAKE_MS:g} in size)")
    return float(ts)


def _json_count(rec: dict, key: str, path: Path, line: int) -> int:
    value = rec[key]
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_TOKENS
            or value != int(value)):
        raise KvsimError(f"{path}:{line}: {key}: bad token count {excerpt(value)} (expected an integer "
                         f"from 0 to {MAX_TOKENS:,})")
    return int(value)


def _hash_ids(hashes: object, path: Path, line: int) -> list[int]:
    if not isinstance(hashes, list) or not _INT_ONLY.issuperset(map(type, hashes)):
        raise KvsimError(f"{path}:{line}: hash_ids: expected a list of integers")
    if hashes and not (0 <= min(hashes) and max(hashes) < MOONCAKE_MAX_HASH_ID):
        raise KvsimError(f"{path}:{line}: hash_ids: ids must lie in [0, 2^40)")
    return hashes
