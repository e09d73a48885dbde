"""The attention kernels against the float64 reference on random inputs: shuffled blocks, a partial last
block, block sizes 1 and 16, GQA. The Triton kernel runs under TRITON_INTERPRET=1 (no GPU needed)."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
os.environ.setdefault("TRITON_INTERPRET", "1")

from kvsim.calibrate.reference import paged_decode_reference, prefill_reference  # noqa: E402
from kvsim.calibrate.torch_attention import (  # noqa: E402
    contiguous_decode_sdpa,
    paged_decode_torch,
    prefill_torch,
)


def paged_inputs(seed, lens, bs, q_heads, kv_heads, d, dtype, pool_blocks=64):
    """Random q and caches, and block tables of shuffled, distinct physical blocks."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(len(lens), q_heads, d, generator=g).to(dtype)
    k = torch.randn(pool_blocks, bs, kv_heads, d, generator=g).to(dtype)
    v = torch.randn(pool_blocks, bs, kv_heads, d, generator=g).to(dtype)
    need = [-(-n // bs) for n in lens]
    perm = torch.randperm(pool_blocks, generator=g)
    tables = torch.zeros(len(lens), max(need), dtype=torch.int32)
    used = 0
    for i, n in enumerate(need):
        tables[i, :n] = perm[used:used + n]
        used += n
    return q, k, v, tables


CASES = [  # (context lengths, block size, q heads, kv heads): partial last blocks, GQA 4:1 and 2:1, MHA
    ([5, 37, 16], 16, 8, 2, 16),
    ([9, 1, 23], 1, 4, 2, 16),
    ([33], 16, 4, 4, 32),
]


def reference(q, k, v, tables, lens, scale):
    f = lambda t: t.float().numpy()  # noqa: E731
    return paged_decode_reference(f(q), f(k), f(v), tables.numpy(), lens, scale)


@pytest.mark.parametrize("lens,bs,qh,kvh,d", CASES)
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_torch_paged_decode_matches_float64(lens, bs, qh, kvh, d, dtype, tol):
    q, k, v, tables = paged_inputs(1, lens, bs, qh, kvh, d, dtype)
    out = paged_decode_torch(q, k, v, tables, lens, d**-0.5)
    np.testing.assert_allclose(out.float().numpy(), reference(q, k, v, tables, lens, d**-0.5), atol=tol)


@pytest.mark.parametrize("lens,bs,qh,kvh,d", CASES)
@pytest.mark.parametrize("dtype,tol", [(torch.float16, 3e-3), (torch.bfloat16, 2e-2)])
def test_triton_paged_decode_matches_float64(lens, bs, qh, kvh, d, dtype, tol):
    pytest.importorskip("triton")
    from kvsim.calibrate.triton_decode import paged_decode_triton

    q, k, v, tables = paged_inputs(2, lens, bs, qh, kvh, d, dtype)
    out = paged_decode_triton(q, k, v, tables, torch.tensor(lens, dtype=torch.int32), d**-0.5)
    np.testing.assert_allclose(out.float().numpy(), reference(q, k, v, tables, lens, d**-0.5), atol=tol)


def test_contiguous_control_matches_float64():
    lens, d = [12, 12], 16
    q, k, v, tables = paged_inputs(3, lens, 4, 8, 2, d, torch.float32)
    kc = torch.stack([k[tables[b].long()].reshape(-1, 2, d)[:12].transpose(0, 1) for b in range(2)])
    vc = torch.stack([v[tables[b].long()].reshape(-1, 2, d)[:12].transpose(0, 1) for b in range(2)])
    out = contiguous_decode_sdpa(q, kc, vc, d**-0.5)
    np.testing.assert_allclose(out.numpy(), reference(q, k, v, tables, lens, d**-0.5), atol=1e-5)


@pytest.mark.parametrize("prefix,chunk,bs", [(0, 7, 4), (21, 5, 16), (3, 9, 1), (5, 140, 16)])
def test_prefill_over_cached_prefix_matches_float64(prefix, chunk, bs):
    """(5, 140): two query tiles of 128 and 12."""
    qh, kvh, d = 4, 2, 16
    g = torch.Generator().manual_seed(prefix + chunk)
    _, kc, vc, tables = paged_inputs(4, [prefix + chunk], bs, qh, kvh, d, torch.float32)
    q = torch.randn(chunk, qh, d, generator=g)
    kn, vn = torch.randn(chunk, kvh, d, generator=g), torch.randn(chunk, kvh, d, generator=g)
    (out,) = prefill_torch([q], [kn], [vn], kc, vc, tables, [prefix], d**-0.5)
    slots = [int(tables[0, p // bs]) * bs + p % bs for p in range(prefix + chunk)]
    k_all = kc.view(-1, kvh, d)[slots].numpy()
    v_all = vc.view(-1, kvh, d)[slots].numpy()
    np.testing.assert_allclose(k_all[prefix:], kn.numpy())  # the chunk was written into its slots
    ref = prefill_reference(q.numpy(), k_all, v_all, prefix, d**-0.5)
    np.testing.assert_allclose(out.numpy(), ref, atol=1e-5)


@pytest.mark.parametrize("lens,bs,qh,kvh,d,splits", [
    ([5, 37, 16], 16, 8, 2, 16, 3),   # slices of one tile; a slice past a short sequence's end is empty
    ([300, 9], 16, 4, 2, 16, 4),
    ([9, 1, 23], 1, 4, 2, 16, 2),
])
def test_triton_split_context_decode_matches_float64(lens, bs, qh, kvh, d, splits):
    """The flash-decoding path: slices of the context merged by their running max and sum."""
    pytest.importorskip("triton")
    from kvsim.calibrate.triton_decode import paged_decode_triton

    q, k, v, tables = paged_inputs(4, lens, bs, qh, kvh, d, torch.float16, pool_blocks=80)
    out = paged_decode_triton(q, k, v, tables, torch.tensor(lens, dtype=torch.int32), d**-0.5, splits=splits)
    np.testing.assert_allclose(out.float().numpy(), reference(q, k, v, tables, lens, d**-0.5), atol=3e-3)


def test_splits_fill_the_gpu_with_slices_of_at_least_256_tokens():
    from kvsim.calibrate.triton_decode import splits_for

    assert splits_for(1, 8, 32768, 264) == 33     # 8 programs -> 264 with 33 slices of ~993 tokens
    assert splits_for(1, 8, 2048, 264) == 8       # capped by 2048 / 256
    assert splits_for(64, 8, 8192, 264) == 1      # 512 programs already
    assert splits_for(4, 8, 200, 264) == 1        # short context: one slice
