"""Check the attention kernels against the float64 reference on the device that will be timed, before
timing it: `python -m kvsim.calibrate.selftest --device cuda` (on a CPU the Triton kernel runs under
TRITON_INTERPRET=1). Exit status 1 if any case is off by more than its tolerance."""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

from kvsim.calibrate.reference import paged_decode_reference

CASES = [  # lens, block size, q heads, kv heads, head dim (cheapest first for --cases 1 on a CPU)
    ([70, 31], 32, 64, 8, 128),
    ([1, 17, 300, 64], 16, 32, 8, 128),
    ([5, 33, 129], 1, 8, 8, 64),
]
TOL = {"fp32": 1e-4, "fp16": 5e-3, "bf16": 3e-2, "fp8": 3e-2}


def run(device: str, cases: int = len(CASES)) -> int:
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    from kvsim.calibrate.runners import TORCH_DTYPES
    from kvsim.calibrate.torch_attention import paged_decode_torch

    dev = torch.device(device)
    dtypes = ["fp16", "bf16"]
    if dev.type == "cuda" and torch.cuda.get_device_capability(dev) >= (8, 9):
        dtypes.append("fp8")
    try:
        from kvsim.calibrate.triton_decode import paged_decode_triton
    except ImportError:
        paged_decode_triton = None
    g = torch.Generator(device="cpu").manual_seed(0)
    failed = 0
    for lens, bs, qh, kvh, d in CASES[:cases]:
        for dt in dtypes:
            nblocks = sum(-(-n // bs) for n in lens) + 7
            qdt = torch.bfloat16 if dt == "fp8" else TORCH_DTYPES[dt]
            q = torch.randn(len(lens), qh, d, generator=g).to(qdt)
            k = torch.randn(nblocks, bs, kvh, d, generator=g).to(TORCH_DTYPES[dt])
            v = torch.randn(nblocks, bs, kvh, d, generator=g).to(TORCH_DTYPES[dt])
            perm = torch.randperm(nblocks, generator=g)
            tables = torch.zeros(len(lens), max(-(-n // bs) for n in lens), dtype=torch.int32)
            at = 0
            for i, n in enumerate(lens):
                tables[i, :-(-n // bs)] = perm[at:at - (-n // bs)]
                at += -(-n // bs)
            ref = paged_decode_reference(q.float().numpy(), k.float().numpy(), v.float().numpy(),
                                         tables.numpy(), lens, d**-0.5)
            args = [t.to(dev) for t in (q, k, v, tables)]
            outs = {"torch": paged_decode_torch(*args, lens, d**-0.5)} if dt != "fp8" else {}
            if paged_decode_triton is not None and (dev.type == "cuda" or dt != "fp8"):
                lens_t = torch.tensor(lens, dtype=torch.int32, device=dev)
                outs["triton"] = paged_decode_triton(*args, lens_t, d**-0.5, splits=1)
                outs["split3"] = paged_decode_triton(*args, lens_t, d**-0.5, splits=3)  # flash-decoding
            for impl, out in outs.items():
                err = float(np.abs(out.float().cpu().numpy() - ref).max())
                ok = err <= TOL[dt]
                failed += not ok
                print(f"{'ok  ' if ok else 'FAIL'} {impl:6s} {dt:5s} bs={bs:2d} heads={qh}/{kvh} d={d} "
                      f"lens={lens}: max abs error {err:.2e} (tolerance {TOL[dt]:.0e})")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--cases", type=int, default=len(CASES), help="run only the first N cases")
    args = ap.parse_args(argv)
    return run(args.device, args.cases)


if __name__ == "__main__":
    sys.exit(main())
