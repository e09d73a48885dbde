"""`--tiers` / `--sweep-tier` parsing and the tier tables of kvsim/sweep/hitrate_report.py, on a stream
whose stack distances are known by hand."""

import pytest

from kvsim.errors import KvsimError
from kvsim.metrics.hitrate import stack_distances
from kvsim.sweep.hitrate_report import (
    GIB,
    Stream,
    Tier,
    parse_placement,
    parse_sweep,
    parse_tiers,
    sweep_columns,
    sweep_rows,
    tier_rows,
    with_tier,
)
from kvsim.workload.request import Request

# bs 4, one block touched and looked up per request: the block stream A A B A C D B E A C, whose
# lookups have stack distances 1, 2, 4, 5, 5 (and five cold ones). 10 requests: 20 prompt blocks, 50
# prompt tokens.
REQS = [Request(rid=i, arrival_s=float(i), prompt_len=5, output_len=1, segments=((ord(c), 5),))
        for i, c in enumerate("AABACDBEAC")]
DATA = stack_distances(REQS, 4)


def stream(pool=None, bytes_per_block=None):
    return Stream("hand", REQS, 4, bytes_per_block, pool)


def chain(tiers):
    return [(t.name, t.blocks) for t in tiers]


def test_parse_tiers_defaults_gpu_to_the_pool_and_converts_units():
    s = stream(pool=3, bytes_per_block=GIB / 8)   # 8 blocks per GiB
    assert chain(parse_tiers("cpu=2,ssd=4", "blocks", s, "exclusive")) == [("gpu", 3), ("cpu", 2), ("ssd", 4)]
    assert chain(parse_tiers("gpu=pool,remote=0", "blocks", s, "exclusive")) == [("gpu", 3), ("remote", 0)]
    assert chain(parse_tiers(" GPU = 4 , cpu = 8", "tokens", s, "exclusive")) == [("gpu", 1), ("cpu", 2)]
    assert chain(parse_tiers("gpu=0.5,cpu=2", "gib", s, "inclusive")) == [("gpu", 4), ("cpu", 16)]
    assert chain(parse_tiers(None, "blocks", s, "exclusive")) == [("gpu", 3)]


@pytest.mark.parametrize(("text", "placement", "msg"), [
    ("hbm=4", "exclusive", "--tiers: unknown tier 'hbm' (tiers, top to bottom: gpu, cpu, ssd, remote)"),
    ("cpu=-1", "exclusive", "--tiers: cpu: capacity must be a finite number >= 0, got '-1'"),
    ("gpu=0", "exclusive", "--tiers: gpu: capacity must be a finite number > 0, got '0'"),
    ("cpu=nan", "exclusive", "--tiers: cpu: capacity must be a finite number >= 0, got 'nan'"),
    ("cpu=x", "exclusive", "--tiers: cpu: bad number 'x'"),
    ("cpu=0.5", "exclusive", "--tiers: cpu: '0.5' blocks is less than one block"),
    ("ssd=4,cpu=2", "exclusive", "--tiers: 'cpu' after 'ssd': list tiers top to bottom"),
    ("cpu=4,gpu=2", "exclusive", "--tiers: 'gpu' after 'cpu'"),
    ("cpu=4,cpu=5", "exclusive", "--tiers: tier 'cpu' given twice"),
    ("cpu", "exclusive", "--tiers: expected NAME=CAPACITY"),
    ("cpu=2", "inclusive", "--tiers: with --placement inclusive each tier must be at least as large as the "
                           "tiers above it, but cpu is 2 blocks and gpu 3 blocks"),
    ("cpu=4,ssd=3", "inclusive", "but ssd is 3 blocks and cpu 4 blocks"),
    ("cpu=0,ssd=2", "inclusive", "but ssd is 2 blocks and gpu 3 blocks"),   # an empty tier is skipped
])
def test_parse_tiers_errors(text, placement, msg):
    with pytest.raises(KvsimError) as err:
        parse_tiers(text, "blocks", stream(pool=3), placement)
    assert msg in str(err.value) and str(err.value).startswith("--tiers: ")


def test_a_tier_below_one_block_names_the_size_of_one_block():
    """Blocks of 4 tokens, GIB / 8 bytes each: the message says what one block is in the unit given."""
    s = stream(pool=3, bytes_per_block=GIB / 8)
    with pytest.raises(KvsimError) as err:
        parse_tiers("cpu=0.1", "gib", s, "exclusive")
    assert str(err.value) == "--tiers: cpu: '0.1' gib is less than one block (one block is 0.125 GiB)"
    with pytest.raises(KvsimError) as err:
        parse_tiers("cpu=3", "tokens", s, "exclusive")
    assert str(err.value) == "--tiers: cpu: '3' tokens is less than one block (one block is 4 tokens)"
    with pytest.raises(KvsimError) as err:
        parse_sweep("cpu=2,8", parse_tiers(None, "tokens", s, "exclusive"), "tokens", s, "exclusive", DATA)
    assert str(err.value) == "--sweep-tier: cpu: '2' tokens is less than one block (one block is 4 tokens)"


def test_parse_tiers_needs_a_gpu_capacity_without_a_pool():
    with pytest.raises(KvsimError, match="--tiers: no KV pool to default the gpu tier to"):
        parse_tiers("cpu=4", "blocks", stream(), "exclusive")
    with pytest.raises(KvsimError, match="--unit gib: KV bytes per block unknown"):
        parse_tiers("gpu=1", "gib", stream(), "exclusive")
    assert chain(parse_tiers("cpu=0,ssd=5", "blocks", stream(pool=3), "inclusive"))[2] == ("ssd", 5)
    with pytest.raises(KvsimError, match="--placement: expected exclusive or inclusive, got 'both'"):
        parse_placement("both")
    assert parse_placement(None) == "exclusive"


def test_tier_rows_by_hand():
    rows = tier_rows(DATA, [Tier("gpu", 1), Tier("cpu", 2), Tier("ssd", 2)], "exclusive", stream())
    assert [(r["tier"], r["distance_from"], r["distance_to"]) for r in rows] == [
        ("gpu", 0, 1), ("cpu", 1, 3), ("ssd", 3, 5), ("total", 0, 5)]
    # hits 1, 1, 3 of 20 prompt blocks; x 4 tokens of 50 prompt tokens
    assert [r["hit_rate_blocks"] for r in rows] == pytest.approx([0.05, 0.05, 0.15, 0.25])
    assert [r["hit_rate_tokens"] for r in rows] == pytest.approx([0.08, 0.08, 0.24, 0.4])
    assert [r["cumulative_hit_rate_blocks"] for r in rows] == pytest.approx([0.05, 0.1, 0.25, 0.25])
    assert rows[-1]["capacity_blocks"] == 5 and rows[-1]["capacity_tokens"] == 20
    inc = tier_rows(DATA, [Tier("gpu", 1), Tier("cpu", 2), Tier("ssd", 4)], "inclusive", stream())
    assert [r["hit_rate_blocks"] for r in inc] == pytest.approx([0.05, 0.05, 0.05, 0.15])
    assert (inc[-1]["capacity_blocks"], inc[-1]["distance_to"]) == (7, 4)   # storage summed; LRU of 4


def test_sweep_rows_and_columns():
    tiers = [Tier("gpu", 1), Tier("ssd", 2)]
    assert chain(with_tier(tiers, "cpu", 3)) == [("gpu", 1), ("cpu", 3), ("ssd", 2)]
    assert chain(with_tier(tiers, "ssd", 9)) == [("gpu", 1), ("ssd", 9)]
    assert sweep_columns(tiers, "cpu")[4:] == (
        "gpu_hit_rate_blocks", "gpu_hit_rate_tokens", "cpu_hit_rate_blocks", "cpu_hit_rate_tokens",
        "ssd_hit_rate_blocks", "ssd_hit_rate_tokens", "total_hit_rate_blocks", "total_hit_rate_tokens")
    rows = sweep_rows(DATA, tiers, "cpu", [0, 1, 2], "exclusive", stream())
    # gpu (0, 1]: 1 hit; cpu (1, 1 + c]; ssd (1 + c, 3 + c], over the distances 1, 2, 4, 5, 5
    assert [r["gpu_hit_rate_blocks"] * 20 for r in rows] == pytest.approx([1, 1, 1])
    assert [r["cpu_hit_rate_blocks"] * 20 for r in rows] == pytest.approx([0, 1, 1])
    assert [r["ssd_hit_rate_blocks"] * 20 for r in rows] == pytest.approx([1, 1, 3])
    assert [r["total_hit_rate_blocks"] * 20 for r in rows] == pytest.approx([2, 3, 5])
    for r in rows:
        parts = sum(r[f"{n}_hit_rate_tokens"] for n in ("gpu", "cpu", "ssd"))
        assert parts == pytest.approx(r["total_hit_rate_tokens"])


def test_parse_sweep_explicit_and_default():
    s = stream(pool=2)
    tiers = parse_tiers("cpu=1,ssd=3", "blocks", s, "exclusive")
    assert parse_sweep("cpu=4,0,1", tiers, "blocks", s, "exclusive", DATA) == ("cpu", [0, 1, 4])
    assert parse_sweep(" SSD=8", tiers, "tokens", s, "exclusive", DATA) == ("ssd", [2])
    # default: the first tier below gpu, 0 and log-spaced points from the gpu's 2 blocks to the working
    # set (5 distinct blocks, at least twice the gpu's), and its --tiers capacity
    name, points = parse_sweep(None, tiers, "blocks", s, "exclusive", DATA)
    assert name == "cpu" and points[:2] == [0, 1] and points[2] == 2 and points[-1] == 5
    assert parse_sweep(None, parse_tiers(None, "blocks", s, "exclusive"), "blocks", s, "exclusive",
                       DATA)[0] == "cpu"
    inc = parse_tiers("cpu=2,ssd=3", "blocks", s, "inclusive")
    assert parse_sweep(None, inc, "blocks", s, "inclusive", DATA) == ("cpu", [0, 2, 3])  # up to ssd's 3
    for text, msg in (("cpu=1", "--sweep-tier: with --placement inclusive each tier must be at least"),
                      ("cpu=4", "but ssd is 3 blocks and cpu 4 blocks"),
                      ("disk=1", "--sweep-tier: unknown tier 'disk'"),
                      ("cpu=-2", "--sweep-tier: cpu: capacity must be a finite number >= 0"),
                      ("gpu=0", "--sweep-tier: gpu: capacity must be a finite number > 0"),
                      ("cpu", "--sweep-tier: expected NAME=CAPACITY,CAPACITY,...")):
        with pytest.raises(KvsimError, match=msg):
            parse_sweep(text, inc, "blocks", s, "inclusive", DATA)
