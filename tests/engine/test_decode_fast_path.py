"""DecodeFastPath (kvsim/engine/decode_fast_path.py): chosen where it applies, and the same batches and
state as the general path, iteration by iteration (block growth and preemption included)."""

from __future__ import annotations

from kvsim.engine.decode_fast_path import DecodeFastPath
from kvsim.engine.group import Group
from kvsim.engine.scheduler import Scheduler, SchedulerLimits
from kvsim.kvcache.paged import PagedKVManager
from kvsim.workload.request import Request


def _sched(windows=(), num_blocks=24) -> Scheduler:
    kv = PagedKVManager(num_blocks, 4)
    return Scheduler(SchedulerLimits(4, 64, True, "recompute", 0, 1.0, windows=windows), kv)


def _fill(s: Scheduler) -> None:
    for i, (prompt, out) in enumerate([(9, 30), (6, 25), (5, 40), (7, 12), (3, 50), (8, 20)]):
        s.add(Group(req=Request(i, 0.0, prompt, out), order=i, seqs=[i], output=out, prompt=prompt))


def _trace(fast: bool) -> list:
    s = _sched()
    _fill(s)
    out, t = [], 0.0
    while s.has_work():
        b = (s.schedule_decodes if fast else s.schedule)(t)
        out.append((b, s.kv.used_blocks, s.total_preemptions, s.dec_blocks, s.token_slots()))
        s.complete(t + 1.0)
        t += 1.0
    return out


def test_the_strategy_is_chosen_only_by_context_without_window_caps():
    assert isinstance(_sched().schedule_decodes.__self__, DecodeFastPath)
    s = _sched(windows=(8,))
    assert s.schedule_decodes == s.schedule


def test_same_batches_as_the_general_path_under_preemption():
    fast, general = _trace(True), _trace(False)
    assert fast == general
    assert fast[-1][2] > 0, "the pool is small enough to preempt"
    assert len(fast) > 40


def test_batches_hold_every_field_by_name():
    """Both paths build a Batch from all its values in field order (tuple.__new__): each has every field,
    decode-only and prefill iterations alike, and the defaults where nothing set them."""
    for b, *_ in _trace(True) + _trace(False):
        assert len(b) == len(b._fields)
        assert (b.spec_tokens, b.lora_tokens, b.lora_adapters, b.lora_load_s) == (0, 0, 0, 0.0)
        assert b.num_seqs == b.prefill_seqs + b.decode_seqs
        assert b.decode_window_tokens == () and b.prefill_window_pairs == ()
        assert b.kv_load_wait_s == 0.0 and b.prefetch_bytes == 0.0


def test_batch_fields_have_the_general_paths_types():
    """The fast path's batch (made in place when compiled, its defaults from _TAIL) holds the same types
    as the general path's, field by field (0 and 0.0 are equal but would print differently)."""
    for (fast, *_), (general, *_) in zip(_trace(True), _trace(False), strict=True):
        assert type(fast) is type(general)
        assert [type(v) for v in fast] == [type(v) for v in general]
