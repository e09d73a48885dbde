"""kvsim/cost/batch.py: Batch's field order."""

from kvsim.cost.batch import Batch


def test_batch_fields_keep_the_order_the_hot_paths_unpack_by_position():
    """Replica._step and RooflineCost.step_time unpack a Batch by position (one statement per iteration
    instead of a read per field): adding, removing or reordering a field means changing those two
    statements with this list (kvsim/cost/batch.py's positions, which KernelCost.forward_time and
    MeanContextOp.time read, follow the names)."""
    assert Batch._fields == (
        "num_seqs", "prefill_seqs", "prefill_tokens", "prefill_attn_pairs", "decode_seqs",
        "decode_context_tokens", "decode_blocks", "swap_in_bytes", "swap_out_bytes", "copy_blocks",
        "recall_bytes", "offload_bytes", "kv_copy_bytes", "decode_window_tokens", "prefill_window_pairs",
        "kv_load_wait_s", "prefetch_bytes", "spec_tokens", "lora_tokens", "lora_adapters", "lora_load_s")
