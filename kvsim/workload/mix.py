"""`kind: mix`: several workloads in one request stream, each with a weight.

Component c runs the mix's arrival process at rate × weight_c / sum of weights (a superposition of
Poisson processes is Poisson at the summed rate), with its own random stream (spawned from the run's
generator, so editing one component leaves the others' requests unchanged). Every component is generated
with the run's request cap and duration; the streams are merged by (arrival_s, component, rid) and the
first `max_requests` kept, so each component contributes its share of the arrivals over the same span.
Trace components keep their own times (their weight does not apply).

Content ids of component c >= 1 are shifted by c × 2^52 (segments, output ids and re-read ids, so a
component's own `rereads` still name its segments), so components never share content; rids, `after`
links and sessions are renumbered. Closed loops are not supported: give the mix an open-loop arrival
process.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kvsim.errors import KvsimError
from kvsim.schema import MAX_REQUESTS
from kvsim.workload.config import WorkloadConfig
from kvsim.workload.links import check_requests
from kvsim.workload.request import Request

COMPONENT_ID_SHIFT = 52


def mix_requests(cfg: WorkloadConfig, rng: np.random.Generator, max_requests: int | None,
                 duration_s: float | None, base_dir: str | Path | None = None) -> list[Request]:
    """The merged request stream of cfg.mix (see the module docstring)."""
    from kvsim.workload.factory import build_requests

    if cfg.arrival.process == "closed_loop":
        raise KvsimError("workload.arrival.process: kind 'mix' needs an open-loop arrival process "
                         "(poisson, gamma or fixed)")
    total_w = sum(c.weight for c in cfg.mix)
    rows: list[tuple[float, int, int, Request]] = []
    for c, (comp, sub_rng) in enumerate(zip(cfg.mix, rng.spawn(len(cfg.mix)), strict=True)):
        arrival = cfg.arrival.model_copy(update={"rate": cfg.arrival.rate * comp.weight / total_w})
        sub = comp.model_copy(update={"arrival": arrival})
        for r in build_requests(sub, sub_rng, max_requests, duration_s, base_dir):
            rows.append((r.arrival_s, c, r.rid, r))
        check_requests(len(rows), f"workload.mix.{c}", 2 * MAX_REQUESTS)  # all components before the cut
    rows.sort(key=lambda row: row[:3])
    if max_requests is not None:
        rows = rows[:max_requests]
    new_rid = {(c, rid): i for i, (_, c, rid, _) in enumerate(rows)}
    out: list[Request] = []
    for i, (_, c, _, r) in enumerate(rows):
        shift = c << COMPONENT_ID_SHIFT
        r.rid = i
        if r.after >= 0:
            r.after = new_rid[(c, r.after)]
        if c:
            r.segments = tuple((cid + shift, n) for cid, n in r.segments)
            r.rereads = tuple(cid + shift for cid in r.rereads)
            if r.output_id >= 0:
                r.output_id += shift
            if r.session >= 0:
                r.session += c << 32
        out.append(r)
    return out
