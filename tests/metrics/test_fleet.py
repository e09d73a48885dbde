"""summary["fleet"] (kvsim/metrics/fleet.py), the per-replica KV capacity of a fleet and replicas.png, on
frames small enough to work out by hand. Two cases:

- mixed: conftest.py's recorder (2 replicas) as a heterogeneous fleet, replica 1 with half the KV blocks;
- P/D: 2 prefill replicas (0, 1; 10 blocks of 4 tokens) and 1 decode replica (2; 20 blocks of 8 tokens):
  3 requests handed off, 1 of a single output token that never leaves prefill replica 1, 1 refused.
"""

from __future__ import annotations

import json
import math

import pytest

from kvsim.engine.fleet.roles import role_report
from kvsim.metrics.fleet import fleet_section
from kvsim.metrics.plots import PLOT_FILES, plot_replicas, write_plots
from kvsim.metrics.recorder import ColumnGroup, Recorder, RequestRow
from kvsim.metrics.report import json_text, render_report
from kvsim.metrics.summary import build_summary, summary_table_rows
from tests.metrics.conftest import TIMELINE_NAMES, _timeline_row
from tests.metrics.test_summary import _assert_plain

approx = pytest.approx
NAN = math.nan


def _pool(name: str, role: str, replicas: int, blocks: int, block_size: int) -> dict:
    return {"name": name, "role": role, "replicas": replicas, "hardware": "h100-sxm",
            "tensor_parallel_size": 1, "capacity_blocks": blocks, "block_size": block_size}


def _replica(index: int, pool: str, role: str, blocks: int, routed: int) -> dict:
    return {"index": index, "pool": pool, "role": role, "hardware": "h100-sxm", "tensor_parallel_size": 1,
            "capacity_blocks": blocks, "routed": routed}


# ---------------------------------------------------------------- mixed, heterogeneous capacity

MIXED_FLEET = {
    "router": "least_loaded",
    "decode_router": None,
    "pools": [_pool("big", "mixed", 1, 10, 4), _pool("small", "mixed", 1, 5, 4)],
    "replicas": [_replica(0, "big", "mixed", 10, 2), _replica(1, "small", "mixed", 5, 2)],
    "kv_transfer": None,
    "roles": role_report(),  # as the engine writes it (kvsim/engine/fleet/roles.py)
}


@pytest.fixture
def mixed(frames, meta):
    """conftest's frames with MIXED_FLEET: replica 0 holds rids 0, 1 (both completed), replica 1 rids 2
    (unfinished) and 3 (rejected)."""
    return frames, {**meta, "fleet": json.loads(json.dumps(MIXED_FLEET))}


def test_mixed_per_replica(mixed):
    (requests, timeline), meta = mixed
    f = build_summary(requests, timeline, meta)["fleet"]
    assert f["router"] == "least_loaded" and f["decode_router"] is None
    assert f["pools"] == MIXED_FLEET["pools"]
    r0, r1 = f["per_replica"]
    assert r0 == approx({
        "index": 0, "pool": "big", "role": "mixed", "hardware": "h100-sxm", "tensor_parallel_size": 1,
        "capacity_blocks": 10, "block_size": 4, "routed": 2,
        "finished": 2,                     # rids 0, 1
        "hit_rate": 16 / 150,              # cached 0 + 16 over prompts 100 + 50
        "ttft_p50_s": 0.75,                # TTFTs [0.5, 1.0]
        "ttft_p99_s": 0.995,               # 0.5 + 0.99 * 0.5
        "output_tokens_per_s": 6.5,        # (11 * 1 + 1 * 2) / makespan 2.0
        "busy_fraction": 0.75,             # dt 0.5 + 0.5 + 0.5 over 2.0
        # token states / 40 [0.3, 0.75, 1.0] held [1.0, 0.5, 0.5]: (0.3 + 0.375 + 0.5) / 2
        "kv_utilization_mean": 0.5875,
        "kv_used_blocks_mean": 0.65,       # used / 10 [0.4, 0.8, 1.0]: (0.4 + 0.4 + 0.5) / 2
        "running_mean": 1.75,              # (1 * 1 + 2 * 0.5 + 3 * 0.5) / 2
    })
    assert r1 == approx({
        "index": 1, "pool": "small", "role": "mixed", "hardware": "h100-sxm", "tensor_parallel_size": 1,
        "capacity_blocks": 5, "block_size": 4, "routed": 2,
        "finished": 0,                     # rid 2 unfinished, rid 3 rejected
        "hit_rate": None,                  # nothing completed
        "ttft_p50_s": None, "ttft_p99_s": None,  # no first token
        "output_tokens_per_s": 0.0,
        "busy_fraction": 0.5,              # dt 1.0 over 2.0
        "kv_utilization_mean": 0.25,       # 5 token states / (5 * 4)
        "kv_used_blocks_mean": 0.4,        # 2 / 5
        "running_mean": 1.0,
    })
    # routed [2, 2]: 2 / 2; finished [2, 0]: 2 / 1
    assert f["load_imbalance"] == {"routed": 1.0, "finished": 2.0}
    assert f["per_role"] is None and f["kv_transfer"] is None


def test_mixed_kv_over_each_replicas_capacity(mixed):
    (requests, timeline), meta = mixed
    s = build_summary(requests, timeline, meta)
    kv = s["kv"]
    # capacities differ (10 vs 5 blocks): no fleet-wide capacity; the block size (4) is common
    assert (kv["capacity_blocks"], kv["block_size"], kv["capacity_tokens"], kv["capacity_bytes"]) == \
        (None, 4, None, None)
    assert kv["utilization_mean"] == approx((0.5875 + 0.25) / 2)       # 0.41875
    assert kv["utilization_max"] == 1.0                                # replica 0: 40 / 40
    assert kv["used_blocks_mean"] == approx((0.65 + 0.4) / 2)          # 0.525
    assert kv["used_blocks_max"] == 1.0
    assert kv["cached_blocks_mean"] == approx((0.05 + 0.0) / 2)        # replica 0: 2 / 10 held 0.5 of 2
    # (used * 4 - states) / capacity tokens: replica 0 0.0625 (test_summary), replica 1 (8 - 5) / 20
    assert kv["internal_fragmentation_mean"] == approx((0.0625 + 0.15) / 2)
    assert kv["breakdown"]["token_states"] == approx(kv["utilization_mean"])
    # the fleet's per-replica means average to the kv and concurrency figures
    per = s["fleet"]["per_replica"]
    assert sum(p["kv_utilization_mean"] for p in per) / 2 == approx(kv["utilization_mean"])
    assert sum(p["kv_used_blocks_mean"] for p in per) / 2 == approx(kv["used_blocks_mean"])
    assert sum(p["running_mean"] for p in per) / 2 == approx(s["concurrency"]["mean"])
    assert sum(p["output_tokens_per_s"] for p in per) == approx(s["throughput"]["output_tokens_per_s"])


def test_homogeneous_fleet_changes_only_the_fleet_key(frames, meta):
    fleet = json.loads(json.dumps(MIXED_FLEET))
    for entry in fleet["pools"] + fleet["replicas"]:
        entry["capacity_blocks"] = 10  # both replicas as meta's capacity_blocks
    plain = build_summary(*frames, meta)
    with_fleet = build_summary(*frames, {**meta, "fleet": fleet})
    assert "fleet" not in plain
    assert with_fleet.pop("fleet")["per_replica"][1]["kv_utilization_mean"] == 0.125  # 5 / 40
    assert json_text(with_fleet) == json_text(plain)


def test_no_fleet_summary_unchanged(frames, meta):
    s = build_summary(*frames, meta)
    assert "fleet" not in s
    assert [label for label, _ in summary_table_rows(s)][-1] == "copy-on-write copies"
    # pinned in test_summary.test_kv: the one capacity of meta
    assert s["kv"]["capacity_blocks"] == 10 and s["kv"]["utilization_mean"] == approx(0.35625)


def test_mixed_rows(mixed):
    rows = summary_table_rows(build_summary(*mixed[0], mixed[1]))
    labels = [label for label, _ in rows]
    assert labels.index("router") == labels.index("copy-on-write copies") + 1  # after the existing rows
    got = dict(rows)
    assert got["router"] == "least_loaded"
    assert got["load imbalance routed / finished (max / mean)"] == "1 / 2"
    assert "busy prefill / decode (mean)" not in got and "KV transfer share of TTFT (mean)" not in got


# ---------------------------------------------------------------- prefill / decode

# as the engine registers them (kvsim/engine/fleet/pd_columns.py): a refused request takes the NaN default
PD_COLUMNS = ColumnGroup({"prefill_replica": "q", "prefill_done_s": "d", "decode_admit_s": "d",
                          "kv_arrival_s": "d", "kv_transfer_bytes": "d", "kv_transfer_s": "d"}, default=NAN)
# rid, replica (decode), arrival, prompt, output, n, first_scheduled (prefill), first_token, finish,
# preemptions, cached, rejected | prefill_replica, prefill_done, decode_admit, kv_arrival, bytes, transfer_s
PD_REQUESTS = [
    ((0, 2, 0.0, 100, 6, 1, 0.0, 0.5, 1.0, 0, 20, 0), (0, 0.2, 0.3, 0.4, 1000.0, 0.1)),
    ((1, 2, 0.5, 300, 11, 1, 0.7, 1.5, 2.0, 0, 0, 0), (1, 1.0, 1.0, 1.2, 3000.0, 0.2)),
    ((2, 2, 1.0, 200, 5, 1, 1.0, 2.5, NAN, 0, 100, 0), (0, 1.5, 2.0, 2.1, 2000.0, 0.1)),  # unfinished
    ((3, 0, 1.5, 9000, 5, 1, NAN, NAN, NAN, 0, 0, 1), None),  # refused at the front: NaN columns
    # one output token: done on prefill replica 1, no hand-off (prefill_replica -1, no transfer)
    ((4, 1, 1.2, 40, 1, 1, 1.2, 1.6, 1.6, 0, 8, 0), (-1, NAN, NAN, NAN, 0.0, 0.0)),
]
REQUEST_NAMES = ("rid", "replica", "arrival_s", "prompt_len", "output_len", "n", "first_scheduled_s",
                 "first_token_s", "finish_s", "preemptions", "cached_tokens", "rejected")
# replica, iteration, t_s, dt_s, running_reqs, waiting, kv_used_blocks, kv_token_states
PD_TIMELINE = [
    (0, 0, 0.0, 0.5, 1, 0, 4, 12),     # prefill replica 0, 10 blocks x 4: each row held 0.5
    (0, 1, 0.5, 0.5, 2, 1, 8, 30),
    (0, -1, 1.0, 0.0, 0, 0, 2, 0),     # idle until the next iteration at 1.5
    (0, 2, 1.5, 0.5, 1, 0, 6, 20),     # last row: held its dt 0.5
    (1, 0, 0.7, 0.3, 1, 0, 8, 30),     # prefill replica 1: held 0.5, until its next iteration
    (1, 1, 1.2, 0.4, 1, 0, 3, 10),     # rid 4; held its dt 0.4
    (2, 0, 0.5, 0.5, 1, 0, 10, 80),    # decode replica 2, 20 blocks x 8: held 0.5
    (2, 1, 1.0, 1.0, 2, 1, 20, 120),   # held 1.0
]
PD_FLEET = {
    "roles": role_report(),
    "router": "prefix_aware",
    "decode_router": "least_loaded",
    "pools": [_pool("pre", "prefill", 2, 10, 4), _pool("dec", "decode", 1, 20, 8)],
    "replicas": [_replica(0, "pre", "prefill", 10, 3), _replica(1, "pre", "prefill", 10, 1),
                 _replica(2, "dec", "decode", 20, 3)],
    # as the engine writes it: bandwidth per NIC, one NIC per replica
    "kv_transfer": {"mode": "after_prefill", "link": "network", "latency_s": 0.0,
                    "bandwidth_bytes_per_s": {"0": 1e4, "1": 1e4, "2": 1e4},
                    "transfers": 3, "bytes": 6000.0, "busy_s": 0.6},
}


@pytest.fixture
def pd_run():
    rec = Recorder()
    rec.add_request_columns(PD_COLUMNS)
    for base, pd_values in PD_REQUESTS:
        rec.request(RequestRow(**dict(zip(REQUEST_NAMES, base, strict=True))), pd_values)
    assert rec.requests_frame()["prefill_replica"].isna().sum() == 1  # rid 3
    names = ("replica", "iteration", "t_s", "dt_s", "running_reqs", "waiting", "kv_used_blocks",
             "kv_token_states")
    assert set(names) <= set(TIMELINE_NAMES)
    for row in PD_TIMELINE:
        rec.iteration(_timeline_row(dict(zip(names, row, strict=True))))
    meta = {"block_size": 4, "capacity_blocks": 10, "fleet": json.loads(json.dumps(PD_FLEET))}
    return rec.requests_frame(), rec.timeline_frame(), meta


def test_pd_per_replica(pd_run):
    s = build_summary(*pd_run)
    assert s["throughput"]["makespan_s"] == 2.0  # last finish 2.0 - first arrival 0.0
    f = s["fleet"]
    assert (f["router"], f["decode_router"]) == ("prefix_aware", "least_loaded")
    p0, p1, d2 = f["per_replica"]
    # prefill replica 0 served rids 0 and 2 (prefilled there) and the refused rid 3 (its `replica`)
    assert p0 == approx({
        "index": 0, "pool": "pre", "role": "prefill", "hardware": "h100-sxm", "tensor_parallel_size": 1,
        "capacity_blocks": 10, "block_size": 4, "routed": 3,
        "finished": 1,                     # rid 0 (rid 2 unfinished)
        "hit_rate": 0.2,                   # rid 0: 20 / 100
        "ttft_p50_s": 1.0,                 # TTFTs [0.5, 1.5]
        "ttft_p99_s": 1.49,                # 0.5 + 0.99 * 1.0
        "output_tokens_per_s": 0.0,        # no completed request has `replica` 0
        "busy_fraction": 0.75,             # (0.5 + 0.5 + 0.5) / 2.0, the idle row not counted
        "kv_utilization_mean": 0.3875,     # [0.3, 0.75, 0, 0.5] held 0.5 each: 1.55 / 4
        "kv_used_blocks_mean": 0.5,        # [0.4, 0.8, 0.2, 0.6]: 2.0 / 4
        "running_mean": 1.0,               # [1, 2, 0, 1]
    })
    # prefill replica 1 served rid 1 (prefilled there, handed off) and rid 4 (done there)
    assert p1 == approx({
        "index": 1, "pool": "pre", "role": "prefill", "hardware": "h100-sxm", "tensor_parallel_size": 1,
        "capacity_blocks": 10, "block_size": 4, "routed": 1,
        "finished": 2,
        "hit_rate": 8 / 340,               # (0 + 8) / (300 + 40)
        "ttft_p50_s": 0.7,                 # [0.4, 1.0]
        "ttft_p99_s": 0.994,               # 0.4 + 0.99 * 0.6
        "output_tokens_per_s": 0.5,        # rid 4's 1 token / 2.0
        "busy_fraction": 0.35,             # (0.3 + 0.4) / 2.0
        "kv_utilization_mean": 19 / 36,    # states / 40 [0.75, 0.25] held [0.5, 0.4]: 0.475 / 0.9
        "kv_used_blocks_mean": 26 / 45,    # used / 10 [0.8, 0.3]: 0.52 / 0.9
        "running_mean": 1.0,
    })
    # decode replica 2 decoded rids 0, 1, 2
    assert d2 == approx({
        "index": 2, "pool": "dec", "role": "decode", "hardware": "h100-sxm", "tensor_parallel_size": 1,
        "capacity_blocks": 20, "block_size": 8, "routed": 3,
        "finished": 2,                     # rids 0, 1
        "hit_rate": None,                  # decode replicas prefill nothing
        "ttft_p50_s": 1.0,                 # [0.5, 1.0, 1.5]
        "ttft_p99_s": 1.49,                # rank 1.98: 1.0 + 0.98 * 0.5
        "output_tokens_per_s": 8.5,        # (6 + 11) / 2.0
        "busy_fraction": 0.75,             # (0.5 + 1.0) / 2.0
        "kv_utilization_mean": 2 / 3,      # states / 160 [0.5, 0.75] held [0.5, 1.0]: 1.0 / 1.5
        "kv_used_blocks_mean": 5 / 6,      # used / 20 [0.5, 1.0]: 1.25 / 1.5
        "running_mean": 5 / 3,             # (0.5 + 2) / 1.5
    })
    # first stage = the prefill replicas: routed [3, 1] -> 3 / 2; finished [1, 2] -> 2 / 1.5
    assert f["load_imbalance"] == approx({"routed": 1.5, "finished": 4 / 3})
    # every completed request's tokens counted once, where they were made
    assert sum(p["output_tokens_per_s"] for p in f["per_replica"]) == s["throughput"]["output_tokens_per_s"]


def test_pd_per_role(pd_run):
    roles = build_summary(*pd_run)["fleet"]["per_role"]
    assert set(roles) == {"prefill", "decode"}
    pre, dec = roles["prefill"], roles["decode"]
    assert pre["replicas"] == 2 and pre["busy_fraction_mean"] == approx(0.55)   # (0.75 + 0.35) / 2
    # first_scheduled - arrival of rids 0, 1, 2, 4 (rid 3 never scheduled): [0.0, 0.2, 0.0, 0.0];
    # sorted [0, 0, 0, 0.2]: p90 at rank 2.7: 0.7 * 0.2; p99 at rank 2.97: 0.97 * 0.2
    assert pre["queue_s"] == approx({"mean": 0.05, "p50": 0.0, "p90": 0.14, "p99": 0.194})
    assert dec["replicas"] == 1 and dec["busy_fraction_mean"] == approx(0.75)
    # decode_admit - prefill_done of rids 0, 1, 2: [0.1, 0.0, 0.5]; sorted [0, 0.1, 0.5]: p90 0.1 + 0.8 * 0.4
    assert dec["queue_s"] == approx({"mean": 0.2, "p50": 0.1, "p90": 0.42, "p99": 0.492})


def test_pd_kv_transfer(pd_run):
    kt = build_summary(*pd_run)["fleet"]["kv_transfer"]
    # over the handed-off rids 0, 1, 2 (rid 4's 0.0 s and 0 bytes are no transfer): [0.1, 0.2, 0.1];
    # sorted [0.1, 0.1, 0.2]: p90 0.1 + 0.8 * 0.1, p99 0.1 + 0.98 * 0.1
    assert kt.pop("transfer_s") == approx({"mean": 0.4 / 3, "p50": 0.1, "p90": 0.18, "p99": 0.198})
    # decode_admit - prefill_done, as per_role.decode.queue_s
    assert kt.pop("decode_admission_wait_s") == approx({"mean": 0.2, "p50": 0.1, "p90": 0.42, "p99": 0.492})
    # copied from the engine's totals
    assert kt.pop("bandwidth_bytes_per_s") == {"0": 1e4, "1": 1e4, "2": 1e4}
    assert kt == approx({
        "mode": "after_prefill", "link": "network", "latency_s": 0.0, "transfers": 3, "bytes": 6000.0,
        "busy_s": 0.6,
        "handed_off": 3,                   # rids 0, 1, 2
        "nics": 3,                         # bandwidth entries
        "link_utilization": 0.2,           # each transfer holds 2 NICs: 2 * 0.6 / 3 NICs / 2.0 makespan
        "bytes_per_request_mean": 2000.0,  # (1000 + 3000 + 2000) / 3
        # kv_transfer_s / TTFT: 0.1 / 0.5, 0.2 / 1.0, 0.1 / 1.5 -> (0.2 + 0.2 + 1/15) / 3
        "ttft_share_mean": 7 / 45,
    })


def test_pd_link_utilization_needs_the_nics(pd_run):
    requests, timeline, meta = pd_run
    meta["fleet"]["kv_transfer"]["bandwidth_bytes_per_s"] = 1e4  # one number: NICs unknown
    kt = fleet_section(requests, timeline, meta)["kv_transfer"]
    assert kt["nics"] is None and kt["link_utilization"] is None and kt["busy_s"] == 0.6


def test_pd_kv_section_per_replica_capacity(pd_run):
    kv = build_summary(*pd_run)["kv"]
    # 10 vs 20 blocks, 4 vs 8 tokens: no fleet-wide capacity, each replica over its own
    assert (kv["capacity_blocks"], kv["block_size"], kv["capacity_tokens"]) == (None, None, None)
    assert kv["utilization_mean"] == approx((0.3875 + 19 / 36 + 2 / 3) / 3)
    assert kv["used_blocks_mean"] == approx((0.5 + 26 / 45 + 5 / 6) / 3)
    assert kv["used_blocks_max"] == 1.0 and kv["utilization_max"] == 0.75
    # (used * block size - states) / capacity tokens: replica 0 [0.1, 0.05, 0.2, 0.1] -> 0.1125,
    # replica 1 [(32 - 30) / 40, (12 - 10) / 40] = 0.05, replica 2 [0, 40 / 160] held [0.5, 1.0] -> 1/6
    assert kv["internal_fragmentation_mean"] == approx((0.1125 + 0.05 + 1 / 6) / 3)


def test_pd_rows(pd_run):
    got = dict(summary_table_rows(build_summary(*pd_run)))
    assert got["router"] == "prefix_aware / decode least_loaded"
    assert got["load imbalance routed / finished (max / mean)"] == "1.5 / 1.333"
    assert got["busy prefill / decode (mean)"] == "55.0% / 75.0%"
    assert got["queue p99 prefill / decode admission (s)"] == "0.194 / 0.492"
    assert got["KV transfer p50 / p99 (s)"] == "0.1 / 0.198"
    assert got["KV transfer share of TTFT (mean)"] == "15.6%"


def test_pd_without_transfer_meta(pd_run):
    requests, timeline, meta = pd_run
    meta["fleet"]["kv_transfer"] = None
    s = build_summary(requests, timeline, meta)
    assert s["fleet"]["kv_transfer"] is None and s["fleet"]["per_role"] is not None
    assert "KV transfer share of TTFT (mean)" not in dict(summary_table_rows(s))


def test_json_safe(pd_run, mixed):
    for s in (build_summary(*pd_run), build_summary(*mixed[0], mixed[1])):
        _assert_plain(s)
        json.dumps(s, allow_nan=False)


def test_empty_run_with_fleet():
    rec = Recorder()
    meta = {"fleet": json.loads(json.dumps(MIXED_FLEET))}
    s = build_summary(rec.requests_frame(), rec.timeline_frame(), meta)
    _assert_plain(s)
    r0 = s["fleet"]["per_replica"][0]
    assert r0["finished"] == 0 and r0["busy_fraction"] is None and r0["kv_utilization_mean"] is None
    assert s["fleet"]["load_imbalance"] == {"routed": 1.0, "finished": None}
    assert s["kv"]["utilization_mean"] is None
    assert summary_table_rows(s)


# ---------------------------------------------------------------- plots

def test_write_plots_adds_replicas_png(tmp_path, pd_run):
    requests, timeline, meta = pd_run
    summary = build_summary(requests, timeline, meta)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    files = write_plots(tmp_path / "a", summary, requests, timeline)
    assert files == [*PLOT_FILES, "replicas.png"]
    write_plots(tmp_path / "b", summary, requests, timeline)
    for name in files:
        data = (tmp_path / "a" / name).read_bytes()
        assert data.startswith(b"\x89PNG") and data == (tmp_path / "b" / name).read_bytes()
    report = render_report(summary, files)
    assert "![Replicas: routed requests, hit rate, busy fraction](replicas.png)" in report


def test_write_plots_without_fleet_has_no_replicas_png(tmp_path, frames, meta):
    requests, timeline = frames
    assert write_plots(tmp_path, build_summary(requests, timeline, meta), requests, timeline) == \
        list(PLOT_FILES)
    assert not (tmp_path / "replicas.png").exists()


def test_plot_replicas_empty_fleet(tmp_path):
    plot_replicas(tmp_path / "replicas.png", {"fleet": {"per_replica": []}}, None, None)
    assert (tmp_path / "replicas.png").read_bytes().startswith(b"\x89PNG")
