"""kvsim/cost/batch.py: Batch's field order."""

from kvsim.cost.batch import Batch


def test_batch_fields_keep_the_order_the_hot_paths_unpack_by_position():
    """The order the hot paths once unpacked a Batch by (they read its fields by name now: cheaper, a
    NamedTuple's unpacking going through an iterator); a field's position stays part of its interface."""
    assert Batch._fields == (
        "num_seqs", "prefill_seqs", "prefill_tokens", "prefill_attn_pairs", "decode_seqs",
        "decode_context_tokens", "decode_blocks", "swap_in_bytes", "swap_out_bytes", "copy_blocks",
        "recall_bytes", "offload_bytes", "kv_copy_bytes", "decode_window_tokens", "prefill_window_pairs",
        "kv_load_wait_s", "prefetch_bytes", "spec_tokens", "lora_tokens", "lora_adapters", "lora_load_s")
