"""The KV pool with a draft on the GPU: the draft's weights come out of the memory vLLM sizes the cache
from, and its own KV sits in every block beside the target's (vLLM allocates the draft's attention layers
in the same KV cache: one block spans the target's and the draft's layers)."""

from __future__ import annotations

import math
from dataclasses import replace

from kvsim.errors import KvsimError
from kvsim.specs.footprint import Capacity
from kvsim.speculative.draft import Draft


def with_draft(cap: Capacity, draft: Draft, model_name: str) -> Capacity:
    """`cap` (the target's KV capacity of one GPU) with the draft in it: weight_bytes += the draft's,
    usable_bytes -= them, kv_bytes_per_token += the draft's per token, bytes_per_block =
    kv_bytes_per_token x block_size, num_blocks = floor(usable / bytes_per_block). For a model of one full
    or MLA group (speculative decoding's rule); unchanged for ngram."""
    if draft.weight_bytes == 0 and draft.kv_bytes_per_token == 0:
        return cap
    usable = cap.usable_bytes - draft.weight_bytes
    if usable <= 0:
        raise KvsimError(f"speculative: the {draft.method} draft's weights ({draft.weight_bytes / 1e9:.2f} "
                         f"GB per GPU) leave no room for KV beside {model_name} "
                         f"({cap.usable_bytes / 1e9:.2f} GB were free for it)")
    per_token = cap.kv_bytes_per_token + draft.kv_bytes_per_token
    page = per_token * cap.block_size
    blocks = max(0, math.floor(usable / page))
    return replace(cap, weight_bytes=cap.weight_bytes + draft.weight_bytes, usable_bytes=usable,
                   kv_bytes_per_token=per_token, bytes_per_block=page, num_blocks=blocks,
                   tokens=blocks * cap.block_size)
