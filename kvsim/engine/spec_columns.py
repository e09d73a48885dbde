"""The recorder columns of speculative decoding (kvsim/engine/spec_sizing.py): the request column group,
its registration before the run, and the run totals (meta key `speculative`). docs/speculative.md
defines them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kvsim.metrics.recorder import ColumnGroup, Recorder

if TYPE_CHECKING:  # annotations only: a run without `speculative` does not load these (start-up)
    from kvsim.engine.spec_deploy import SpecDeployment
    from kvsim.engine.spec_sizing import SpecSizing

REQUEST_COLUMNS: dict[str, str] = {
    "spec_steps": "q",            # verify steps its decode ran (every decode run, preempted ones included)
    "spec_accepted_drafts": "q",  # draft tokens accepted over those steps
}
"""Columns added to requests.parquet with `speculative` set; a request that never decoded gets 0."""
REQUEST_GROUP = ColumnGroup(REQUEST_COLUMNS, default=0)


def register_columns(recorder: Recorder) -> None:
    recorder.add_request_columns(REQUEST_GROUP)


def run_totals(spec: SpecDeployment, sizings: list[SpecSizing], draft_s: float,
               plain_s: float) -> dict[str, Any]:
    """The `speculative` entry of the run's meta: the configuration (SpecDeployment.describe), the draft's
    seconds and the iterations' seconds without speculation (every pool's), and the verify steps by
    accepted length over every decode run that ended (finished or preempted), summed over the replicas."""
    hist = np.zeros(spec.k + 1, dtype=np.int64)
    for s in sizings:
        hist += s.hist
    return {**spec.describe(), "draft_s": draft_s, "busy_s_without_speculation": plain_s,
            "steps_by_accepted": [int(x) for x in hist]}
