"""One replica's adapter slots (kvsim/lora/slots.py) on a hand-followed sequence: max_loras 2, max_cpu_loras
3, adapter a loads gpu_bytes[a] = a + 1 bytes over a 1 B/s host link after reading disk_bytes[a] =
10 (a + 1) bytes from a 0.5 B/s disk."""

from __future__ import annotations

import pytest

from kvsim.cost.batch import Batch
from kvsim.lora.slots import DISK, GPU, HOST, AdapterSlots


def slots():
    return AdapterSlots(2, 3, [1, 2, 3, 4], [10, 20, 30, 40], host_bw=1.0, disk_bw=0.5)


def test_lru_slots_host_cache_and_the_distinct_adapter_rule():
    s = slots()
    assert s.activate(0, 0, True) == 10 / 0.5 + 1  # disk 20 s + host link 1 s
    s.release(0)
    assert s.activate(1, 1, True) == 20 / 0.5 + 2  # 42 s; GPU [0, 1], host [0, 1]
    s.release(1)
    assert s.activate(0, 2, True) == 0.0  # in a slot; GPU order [1, 0]
    assert s.activate(2, 3, True) == 30 / 0.5 + 3  # 63 s: slot of 1 (LRU, unused) taken: GPU [0, 2]
    assert (s.where(0), s.where(1), s.where(2), s.where(3)) == (GPU, HOST, GPU, DISK)
    assert not s.admissible(1) and s.admissible(0) and s.admissible(-1)  # {0, 2} run: max_loras reached
    s.skip(4)
    s.release(0)
    assert s.activate(1, 4, True) == 2.0  # host memory: 2 B over 1 B/s; slot of 0 taken: GPU [2, 1]
    s.release(2)
    # host LRU [0, 2, 1] is full: 0 leaves for 3; GPU [2, 1] full: 2 (unused) leaves: GPU [1, 3]
    assert s.activate(3, 5, True) == 40 / 0.5 + 4
    assert list(s.gpu) == [1, 3] and list(s.host) == [2, 1, 3]
    assert (s.gpu_hits, s.host_hits, s.disk_loads, s.loads, s.skips) == (1, 1, 4, 5, 1)
    assert s.load_s == 21 + 42 + 63 + 2 + 84
    assert (s.load_bytes, s.disk_read_bytes) == (1 + 2 + 3 + 2 + 4, 100)
    assert s.request_values(4, 1) == (1, HOST, 1, 2.0, 2.0, 1)  # (adapter, found, loads, bytes, s, skips)
    assert s.request_values(2, 0) == (0, GPU, 0, 0.0, 0.0, 0)
    assert s.request_values(99, -1) == (-1, -1, 0, 0.0, 0.0, 0)


def test_a_re_admission_loads_but_is_not_counted_as_a_first_admission():
    s = slots()
    s.activate(0, 7, True)
    s.release(0)
    s.activate(1, 8, True)
    s.activate(2, 9, True)  # GPU [1, 2]: 0 left its slot
    s.release(1)
    s.release(2)
    assert s.activate(0, 7, False) == 1.0  # host memory: 1 B over the link
    assert (s.gpu_hits, s.host_hits, s.disk_loads) == (0, 0, 3)
    assert s.request_values(7, 0)[:3] == (0, DISK, 2)


def test_the_batch_gets_adapter_tokens_adapters_and_the_pending_loads():
    class G:
        def __init__(self, adapter, n, chunk):
            self.req = type("R", (), {"adapter": adapter})()
            self.n, self.chunk = n, chunk

    class Sched:
        _paused = False
        prefilling = {G(0, 1, 100): None, G(-1, 1, 50): None}

    s = slots()
    s.activate(0, 1, True, seqs=1)  # prefilling (the 100-token chunk)
    s.activate(1, 2, True, seqs=2)  # two decoding sequences
    b = s.batch(Batch(prefill_tokens=150, decode_seqs=2), Sched())
    assert (b.lora_tokens, b.lora_adapters, b.lora_load_s) == (100 + 2, 2, pytest.approx(21 + 42))
    assert s.batch(Batch(), Sched()).lora_load_s == 0.0  # the loads are charged once
