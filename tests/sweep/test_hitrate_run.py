"""kvsim/sweep/hitrate_run.py on a hand trace whose stack distances are known: the run's rows, the
tables' cells and the closing line."""

from pathlib import Path

from rich.console import Console

from kvsim.sweep.hitrate_run import compute, footer, tables, write_files

# block stream A A B A C D B E A C (one 16-token block per request): lookups at stack distances 1, 2, 4,
# 5, 5, five cold; 20 prompt blocks (a prompt of 20 tokens is two blocks, the second partial)
HASHES = [0, 0, 1, 0, 2, 3, 1, 4, 0, 2]


def hand_trace(tmp_path: Path) -> Path:
    path = tmp_path / "hand.jsonl"
    path.write_text("".join(f'{{"timestamp": {1000 * i}, "input_length": 20, "output_length": 1, '
                            f'"hash_ids": [{h}]}}\n' for i, h in enumerate(HASHES)))
    return path


def text(table) -> str:
    console = Console(width=200, record=True, markup=False, emoji=False, highlight=False)
    console.print(table)
    return console.export_text()


def run(tmp_path, capacities="1,3,5", tiers=None, placement=None, sweep_tier=None):
    return compute(hand_trace(tmp_path), [], None, 16, None, "bf16", 1.0, capacities, "blocks", tiers,
                   placement, sweep_tier)


def test_curve_table_and_footer(tmp_path):
    res = run(tmp_path)
    assert res.tier is None and [r["capacity_blocks"] for r in res.rows] == [1, 3, 5]
    (table,) = tables(res)
    assert table.title == "LRU prefix hit rate: hand.jsonl (block size 16)"
    lines = text(table).splitlines()
    assert [c.header for c in table.columns][0] == "capacity (blocks)"
    assert any(line.split("│")[1:-1] == ["                 5 ", "     80 ", "   - ", "             25.0% ",
                                          "             40.0% "] for line in lines)
    assert footer(res, Path("o")) == ("10 requests, 200 prompt tokens, 5 distinct blocks; infinite-cache hit "
                                      "rate 40.0%; written o/hitrate.csv, o/hitrate.png")
    write_files(tmp_path, res)
    assert (tmp_path / "hitrate.csv").is_file() and not (tmp_path / "tiers.csv").exists()


def test_tier_tables(tmp_path):
    res = run(tmp_path, tiers="gpu=1,cpu=2,ssd=2", sweep_tier="cpu=0,1,2")
    assert res.files[-3:] == ["tiers.csv", "tiers_sweep.csv", "tiers.png"]
    tier, sweep = tables(res)
    assert tier.title.startswith("Exclusive KV tiers: hand.jsonl")
    assert [c.header for c in sweep.columns] == ["cpu (blocks)", "GiB", "gpu", "cpu", "ssd", "total"]
    # exclusive gpu (0, 1], cpu (1, 3], ssd (3, 5]: token hit rates 8%, 8%, 24%
    row = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
           for line in text(tier).splitlines() if line.startswith("│")}
    assert row["cpu"] == ["2", "-", "5.0%", "8.0%", "10.0%", "16.0%"]
    assert "; * =" not in footer(res, Path("o"))
    write_files(tmp_path, res)
    assert sorted(p.name for p in tmp_path.glob("tiers*")) == ["tiers.csv", "tiers.png", "tiers_sweep.csv"]


def test_placement_in_the_title(tmp_path):
    res = run(tmp_path, tiers="gpu=1,cpu=2,ssd=4", placement="inclusive")
    assert tables(res)[0].title.startswith("Inclusive KV tiers")
