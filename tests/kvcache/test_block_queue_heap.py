"""BlockQueue compiled against the same block_queue.py run as Python: the same heap, entry for entry, after
every step (block_queue.pxd's C heap operations replicate heapq's), the same pops and bookkeeping. As Python
both sides are the same code."""

import importlib.util
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from queue_model import QueueModel

from kvsim.kvcache import block_queue

N = 160


def _pure_module():
    spec = importlib.util.spec_from_file_location("_block_queue_pure",
                                                  Path(block_queue.__file__).with_name("block_queue.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


PURE = _pure_module()


def _run(policy: str, seed: int, steps: int, base: int) -> None:
    rnd = random.Random(seed)
    a, b = QueueModel(policy, N, block_queue.BlockQueue, base), QueueModel(policy, N, PURE.BlockQueue, base)
    for _ in range(steps):
        op = rnd.choice(("release", "release", "release", "untouched", "revive", "hit", "hit", "pop"))
        blocks = rnd.sample(range(N), rnd.randint(1, 24))
        if op == "release":
            blocks = [x for x in blocks if a.rc[x] == 1]
            if blocks:
                if rnd.random() < 0.3:
                    rnd.shuffle(blocks)
                for s in (a, b):
                    s.release(blocks, True, seed)
        elif op == "untouched" or (op == "revive" and policy == "lfu"):
            cached = [x for x in blocks if a.rc[x] == 0]
            if cached:
                for s in (a, b):
                    for x in cached:
                        s.hit(x)
                    s.release(cached, False, seed)
        elif op == "revive":
            cached = [x for x in blocks if a.rc[x] == 0]
            if cached:
                for s in (a, b):
                    s.undo(cached)
        elif op == "hit":
            for x in blocks:
                if a.rc[x] == 0:
                    a.hit(x)
                    b.hit(x)
        else:
            k = min(rnd.randint(1, 10), len(a.q))
            if k:
                assert a.pop(k) == b.pop(k)
        assert a.state() == b.state()
    k = len(a.q)
    assert a.pop(k) == b.pop(k)
    assert a.state() == b.state()


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["lru", "lfu", "length"]), st.integers(0, 2**32), st.sampled_from([0, 2**38, 2**62]))
def test_the_heap_is_the_same_as_pythons_after_every_step(policy, seed, base):
    """base: the clock's start (2**38, 2**62: priorities and tickets past the C fast paths)."""
    _run(policy, seed, 300, base)


@pytest.mark.parametrize("policy", ["lru", "length"])
def test_a_long_run_with_many_batches(policy):
    _run(policy, 7, 4000, 0)
