"""Columns (kvsim/specs/table_columns.py): a kernel table as numpy columns gives the rows, values and order
the pandas DataFrame gives, and a kernel cost model built from Columns tables equals one built from frames
(the factory's tables are Columns: a run imports no pandas)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from kvsim.cost.batch import Batch
from kvsim.cost.expert_parallel import ExpertParallel
from kvsim.cost.kernels import KERNEL_DEFAULTS, KernelCost
from kvsim.specs.catalog import get_model
from kvsim.specs.hardware import load_hardware
from kvsim.specs.kernel_tables import TABLES, kernels_dir, load_kernel_tables, read_table
from kvsim.specs.table_columns import Column, Columns


def _both(profile: str, table: str):
    path = kernels_dir(profile) / f"{table}.parquet"
    return read_table(path, table, columns=True), read_table(path, table)


def test_a_table_as_columns_holds_the_frames_rows_columns_and_dtypes():
    cols, df = _both("h200", "decode_attention")
    assert isinstance(cols, Columns) and len(cols) == len(df)
    assert list(cols.columns) == list(df.columns) == list(TABLES["decode_attention"].columns)
    for name in cols.columns:
        got, want = cols[name], df[name].to_numpy()
        assert isinstance(got, Column)
        assert got.dtype.kind == ("O" if want.dtype.kind in "OU" else want.dtype.kind)
        assert got.tolist() == want.tolist()
    pd.testing.assert_frame_equal(cols.frame(), df)


def test_selections_unique_isin_and_nunique_are_the_frames():
    cols, df = _both("h200", "gemm")
    assert not cols["latency_s"].flags.writeable  # shared: never changed
    pick_c = cols[(cols["dtype"] == "bfloat16") & (cols["m"] <= 64)]
    pick_d = df[(df["dtype"] == "bfloat16") & (df["m"] <= 64)]
    assert len(pick_c) == len(pick_d) > 0
    for name in ("kernel", "m", "n", "k", "latency_s"):
        assert pick_c[name].tolist() == pick_d[name].tolist()
        assert pick_c[name].unique().tolist() == pick_d[name].unique().tolist()  # order of appearance
        assert pick_c[name].nunique() == pick_d[name].nunique()
    wanted = [4096, 14336]
    assert pick_c[pick_c["n"].isin(wanted)]["latency_s"].tolist() == \
        pick_d[pick_d["n"].isin(wanted)]["latency_s"].tolist()
    sub = pick_c[["m", "n"]]
    assert list(sub.columns) == ["m", "n"] and "k" not in sub
    # anything else is pandas' own, on the same rows with the same labels
    pd.testing.assert_frame_equal(pick_c.groupby(["m", "n"], as_index=False)["latency_s"].min(),
                                  pick_d.groupby(["m", "n"], as_index=False)["latency_s"].min())
    pd.testing.assert_frame_equal(pick_c.frame(), pick_d)
    assert pick_c["latency_s"].median() == pick_d["latency_s"].median()


def test_columns_from_a_frame_without_dictionaries():
    df = pd.DataFrame({"kernel": ["a", "b", "a"], "m": [3, 1, 2], "latency_s": [1.0, np.nan, 3.0]})
    cols = Columns.from_arrow(pa.Table.from_pandas(df, preserve_index=False), tuple(df.columns))
    assert cols["kernel"].tolist() == ["a", "b", "a"] and cols["m"].dtype == np.int64
    assert np.isnan(cols["latency_s"][1])
    assert cols[cols["kernel"] == "a"]["m"].tolist() == [3, 2]
    with pytest.raises(KeyError):
        cols["nope"]


def _batches() -> list[Batch]:
    out = []
    for seqs in (1, 3, 16, 64, 300):
        for ctx in (17, 900, 4096, 70000):
            out.append(Batch(num_seqs=seqs, decode_seqs=seqs, decode_context_tokens=seqs * ctx,
                             decode_blocks=seqs * (ctx // 16 + 1)))
        for tokens in (5, 512, 8192):
            out.append(Batch(num_seqs=seqs, prefill_seqs=seqs, prefill_tokens=tokens * seqs,
                             prefill_attn_pairs=seqs * tokens * (tokens + 1) / 2))
    return out


CASES = [("llama-3.1-8b", "h200", 1, "auto"), ("llama-2-70b", "a100-80gb", 2, "auto"),
         ("llama-3.1-70b", "h100-sxm", 4, "fp8"), ("gpt-oss-120b", "h200", 1, "auto"),
         ("qwen3-235b-a22b", "h200", 4, "auto"), ("deepseek-v2-lite", "h200", 1, "auto"),
         ("gemma-3-27b", "h200", 2, "auto")]


@pytest.mark.parametrize("name, profile, tp, kv_dtype", CASES)
def test_a_kernel_cost_model_from_columns_equals_one_from_frames(name, profile, tp, kv_dtype):
    model, hw = get_model(name), load_hardware(profile)
    costs = [KernelCost(model, hw, tp, kv_dtype, 1.0, load_kernel_tables(profile, lazy=True, columns=c),
                        **KERNEL_DEFAULTS) for c in (True, False)]
    assert costs[0].describe() == costs[1].describe()
    for b in _batches():
        assert costs[0].forward_time(b) == costs[1].forward_time(b)
    assert costs[0].describe() == costs[1].describe()  # the same fallbacks counted


def test_fp8_block_and_expert_parallel_from_columns_equal_frames():
    model = dataclasses.replace(get_model("qwen3-235b-a22b"), weight_dtype="fp8_block")
    hw = load_hardware("h200")
    tables = [load_kernel_tables("h200", lazy=True, columns=c) for c in (True, False)]
    costs = [KernelCost(model, hw, 4, "auto", 1.0, t, **KERNEL_DEFAULTS) for t in tables]
    for b in _batches():
        assert costs[0].forward_time(b) == costs[1].forward_time(b)
    assert costs[0].describe() == costs[1].describe()
    eps = [ExpertParallel(get_model("qwen3-235b-a22b"), hw, 4, 2, "naive", 1.0, t, c)
           for t, c in zip(tables, costs, strict=True)]
    assert eps[0].grids.keys() == eps[1].grids.keys()
    for key in eps[0].grids:
        assert np.array_equal(eps[0].grids[key].log_latency, eps[1].grids[key].log_latency, equal_nan=True)


def test_numpy_on_a_column_never_reaches_pandas():
    cols, _ = _both("h200", "allreduce")
    with pytest.raises(AttributeError):
        cols["gpus"]._mask  # noqa: B018 (what np.ma.is_masked probes)
    assert np.unique(cols["gpus"]).tolist() == sorted(set(cols["gpus"].tolist()))
