"""The `fleet` section of summary.json and its console rows (docs/metrics.md, "Fleet"): per replica the
requests routed and finished there, hit rate, TTFT, output rate, busy time and KV use; the router's load
imbalance; for a prefill / decode (P/D) fleet each role's busy time and queues and the KV hand-off between
them. Built only when the run's meta has a "fleet" entry (several replicas or a `cluster:` section)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kvsim.metrics.frames import completed_mask, makespan_s, replica_capacities, with_hold
from kvsim.metrics.stats import percentiles, plain, time_weighted_mean, whole

if TYPE_CHECKING:
    import pandas as pd

# What each replica role reports comes with the run: meta["fleet"]["roles"] (kvsim/engine/fleet/roles.py
# role_report): per role `front` (the first router chooses among its replicas: `load_imbalance` compares
# them), `hit_rate` (its cache hits are its own) and `queue` / `queue_of` (its per_role queue figure).

_EMPTY = np.array([], dtype=np.int64)


def _plain_copy(data: Any) -> Any:
    """A meta entry (dicts, lists, scalars) with every scalar made JSON-safe by `plain`."""
    if isinstance(data, dict):
        return {str(k): _plain_copy(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_plain_copy(v) for v in data]
    return plain(data)


def _column(df: pd.DataFrame, name: str) -> np.ndarray:
    """df[name] as float64, or all NaN when the frame lacks the column (a run without P/D)."""
    if name in df.columns:
        return df[name].to_numpy(np.float64)
    return np.full(len(df), np.nan)


def _positions(df: pd.DataFrame, column: str) -> dict[int, np.ndarray]:
    """Replica index -> row positions of df whose `column` holds it (NaN and negative ids skipped)."""
    if column not in df.columns or not len(df):
        return {}
    out = {}
    for key, pos in df.groupby(column, sort=True).indices.items():
        if key == key and key >= 0:
            out[int(key)] = pos
    return out


def _ratio(num: float, den: float | None) -> float | None:
    return plain(num / den) if den else None


def _imbalance(values: list[Any]) -> float | None:
    """max / mean of the values (1.0: even); None when a value is unknown or the mean is 0."""
    if not values or any(v is None for v in values):
        return None
    mean = float(np.mean(values))
    return float(max(values)) / mean if mean > 0 else None


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.mean(known)) if known else None


class _Frames:
    """The request and timeline columns the per-replica figures read, as numpy arrays."""

    def __init__(self, requests: pd.DataFrame, timeline: pd.DataFrame) -> None:
        self.done = completed_mask(requests).to_numpy(bool)
        self.prompt = requests["prompt_len"].to_numpy(np.float64)
        self.output = (requests["output_len"] * requests["n"]).to_numpy(np.float64)
        self.cached = requests["cached_tokens"].to_numpy(np.float64)
        self.ttft = _column(requests, "first_token_s") - _column(requests, "arrival_s")
        self.by_replica = _positions(requests, "replica")
        self.by_prefill = _positions(requests, "prefill_replica")
        ran = timeline["iteration"].to_numpy() >= 0  # idle rows (iteration -1) are not busy
        self.busy = np.where(ran, timeline["dt_s"].to_numpy(np.float64), 0.0)
        self.hold = timeline["hold_s"].to_numpy(np.float64)
        self.running = timeline["running_reqs"].to_numpy(np.float64)
        self.used = timeline["kv_used_blocks"].to_numpy(np.float64)
        self.states = timeline["kv_token_states"].to_numpy(np.float64)
        self.rows = _positions(timeline, "replica")


def _replica(r: dict[str, Any], f: _Frames, cap: tuple[float, float], span: float | None,
             roles: dict[str, dict]) -> dict[str, Any]:
    """The per_replica entry of one replica (meta's fleet.replicas entry `r`)."""
    idx, role = int(r["index"]), r["role"]
    here = f.by_replica.get(idx, _EMPTY)  # its `replica`: it produced their tokens
    pos = np.sort(np.concatenate((here, f.by_prefill.get(idx, _EMPTY))))  # served: prefilled here too
    done = pos[f.done[pos]]
    made = here[f.done[here]]
    prompt = float(f.prompt[done].sum())
    ttft = percentiles(f.ttft[pos])
    rows = f.rows.get(idx, _EMPTY)
    blocks, block_size = cap
    hold = f.hold[rows]
    return {
        "index": idx,
        "pool": r.get("pool"),
        "role": role,
        "hardware": _plain_copy(r.get("hardware")),
        "tensor_parallel_size": plain(r.get("tensor_parallel_size")),
        "capacity_blocks": plain(r.get("capacity_blocks")),
        "block_size": whole(block_size) if block_size == block_size else None,
        "routed": plain(r.get("routed")),
        "finished": int(done.size),
        # (decode replicas prefill nothing: their requests' cache hits happened on the prefill side)
        "hit_rate": float(f.cached[done].sum()) / prompt if prompt > 0 and roles[role]["hit_rate"] else None,
        "ttft_p50_s": ttft["p50"],
        "ttft_p99_s": ttft["p99"],
        # P/D: a handed-off request's tokens (its first one too) are the decode replica's
        "output_tokens_per_s": _ratio(float(f.output[made].sum()), span),
        "busy_fraction": _ratio(float(f.busy[rows].sum()), span),
        "kv_utilization_mean": time_weighted_mean(f.states[rows] / (blocks * block_size), hold),
        "kv_used_blocks_mean": time_weighted_mean(f.used[rows] / blocks, hold),
        "running_mean": time_weighted_mean(f.running[rows], hold),
    }


def _handed_off(requests: pd.DataFrame) -> np.ndarray:
    """P/D: the requests a prefill replica handed to a decode replica (a `prefill_replica` >= 0)."""
    return _column(requests, "prefill_replica") >= 0


def _per_role(requests: pd.DataFrame, per_replica: list[dict[str, Any]],
              roles: dict[str, dict]) -> dict[str, Any]:
    """Busy time and queue of the replicas of each role that reports a queue (P/D: prefill, decode)."""
    replica, prefill = _column(requests, "replica"), _column(requests, "prefill_replica")
    handed = _handed_off(requests)
    out = {}
    for role, report in roles.items():
        if report["queue"] is None:
            continue
        members = [p for p in per_replica if p["role"] == role]
        ids = [p["index"] for p in members]
        if report["queue_of"] == "served":  # every request it served (prefilled there too)
            mask = np.isin(replica, ids) | np.isin(prefill, ids)
        else:  # the requests handed to it
            mask = np.isin(replica, ids) & handed
        start, end = report["queue"]
        wait = _column(requests, end) - _column(requests, start)
        out[role] = {
            "replicas": len(members),
            "busy_fraction_mean": _mean([p["busy_fraction"] for p in members]),
            "queue_s": percentiles(wait[mask]),
        }
    return out


def _kv_transfer(requests: pd.DataFrame, info: dict[str, Any], span: float | None) -> dict[str, Any]:
    """The hand-off link's totals (the engine's) and the transfers of the handed-off requests (request
    columns; a request that never left its prefill replica has no transfer)."""
    out = _plain_copy(info)
    bandwidth = out.get("bandwidth_bytes_per_s")
    # one NIC per P/D replica (the engine's bandwidth per NIC); each transfer holds two, busy_s counts it once
    nics = len(bandwidth) if isinstance(bandwidth, dict) and bandwidth else None
    busy = out.get("busy_s")
    handed = _handed_off(requests)
    moved = _column(requests, "kv_transfer_bytes")[handed]
    secs = _column(requests, "kv_transfer_s")[handed]
    ttft = (_column(requests, "first_token_s") - _column(requests, "arrival_s"))[handed]
    ok = ~np.isnan(secs) & (ttft > 0)  # a first token too
    wait = (_column(requests, "decode_admit_s") - _column(requests, "prefill_done_s"))[handed]
    out.update({
        "handed_off": int(handed.sum()),
        "nics": nics,
        "link_utilization": 2 * busy / nics / span if busy is not None and nics and span else None,
        "bytes_per_request_mean": plain(np.nanmean(moved)) if (~np.isnan(moved)).any() else None,
        "transfer_s": percentiles(secs),
        "decode_admission_wait_s": percentiles(wait),
        "ttft_share_mean": plain((secs[ok] / ttft[ok]).mean()) if ok.any() else None,
    })
    return out


def fleet_section(requests: pd.DataFrame, timeline: pd.DataFrame, meta: dict[str, Any]) -> dict[str, Any]:
    """summary["fleet"] from the requests and timeline frames and meta["fleet"] (docs/metrics.md, Fleet).
    Every figure is JSON-safe; an undefined one is None."""
    fleet = meta["fleet"]
    timeline = with_hold(timeline)
    span = makespan_s(requests)
    replicas = sorted(fleet["replicas"], key=lambda r: int(r["index"]))
    caps = replica_capacities(replicas, fleet.get("pools"), meta.get("block_size"))
    frames = _Frames(requests, timeline)
    roles = fleet["roles"]
    per_replica = [_replica(r, frames, caps[int(r["index"])], span, roles) for r in replicas]
    first = [p for p in per_replica if roles[p["role"]]["front"]]
    pd_run = any(roles[p["role"]]["queue"] is not None for p in per_replica)
    info = fleet.get("kv_transfer")
    return {
        "router": fleet.get("router"),
        "decode_router": fleet.get("decode_router"),
        "pools": _plain_copy(fleet.get("pools") or []),
        "per_replica": per_replica,
        "load_imbalance": {
            "routed": _imbalance([p["routed"] for p in first]),
            "finished": _imbalance([p["finished"] for p in first]),
        },
        "per_role": _per_role(requests, per_replica, roles) if pd_run else None,
        "kv_transfer": _kv_transfer(requests, info, span) if info is not None else None,
    }


def fleet_rows(section: dict[str, Any], fmt, pct) -> list[tuple[str, str]]:
    """Console / report.md rows for the section: router, load imbalance and, for P/D, each role's busy
    time and queue p99 and the KV transfer's time and share of TTFT."""
    router = section.get("router") or "-"
    if section.get("decode_router"):
        router += f" / decode {section['decode_router']}"
    imb = section["load_imbalance"]
    rows = [
        ("router", router),
        ("load imbalance routed / finished (max / mean)", f"{fmt(imb['routed'])} / {fmt(imb['finished'])}"),
    ]
    roles = section.get("per_role")
    if roles:
        pre, dec = roles["prefill"], roles["decode"]
        rows += [
            ("busy prefill / decode (mean)", f"{pct(pre['busy_fraction_mean'])} / "
                                             f"{pct(dec['busy_fraction_mean'])}"),
            ("queue p99 prefill / decode admission (s)", f"{fmt(pre['queue_s']['p99'])} / "
                                                         f"{fmt(dec['queue_s']['p99'])}"),
        ]
    kt = section.get("kv_transfer")
    if kt:
        rows += [
            ("KV transfer p50 / p99 (s)", f"{fmt(kt['transfer_s']['p50'])} / {fmt(kt['transfer_s']['p99'])}"),
            ("KV transfer share of TTFT (mean)", pct(kt["ttft_share_mean"])),
        ]
    return rows
