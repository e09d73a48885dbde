"""Layer-group kinds (kvsim/specs/kinds.py): each kind's bytes, caps and pages on a hand case, and the
registry: exactly the kinds, each with its managers."""

import pytest

from kvsim.kvcache.managers.kinds import KIND_MANAGERS
from kvsim.specs.kinds import KINDS, AttentionTerms
from kvsim.specs.layers import GROUP_KINDS, CompressedPart, LayerGroup, window_caps
from kvsim.specs.pages import plan_pages

FULL = LayerGroup("full", range(4), 4 * 256.0)
SLIDING = LayerGroup("sliding", (0, 1), 2 * 256.0, window=32)
STATE = LayerGroup("state", (0,), state_bytes=4096.0)
COMPRESSED = LayerGroup("compressed", (0, 1), state_bytes=100.0, window=8,
                        parts=(CompressedPart("csa", 4, 40.0, topk=2), CompressedPart("hca", 16, 20.0)))


def test_registry_lists_exactly_the_kinds_in_order_each_with_managers():
    assert tuple(KINDS) == GROUP_KINDS == ("full", "mla", "sliding", "state", "compressed")
    assert all(kind.name == name for name, kind in KINDS.items())
    assert set(KIND_MANAGERS) == set(KINDS)
    for name, kind in KINDS.items():
        managers = KIND_MANAGERS[name]
        assert (managers.tables is not None) == (managers.cached is not None) == kind.token_paged, name


def test_a_group_dispatches_through_its_kind_object():
    assert FULL.kind_spec is KINDS["full"] and COMPRESSED.kind_spec is KINDS["compressed"]
    assert repr(FULL).startswith("LayerGroup(kind='full'") and "kind_spec" not in repr(FULL)
    with pytest.raises(ValueError, match="must be one of full, mla, sliding, state, compressed"):
        LayerGroup("ring", (0,), 1.0)
    with pytest.raises(ValueError, match="a sliding group needs a window"):
        LayerGroup("sliding", (0,), 1.0)
    with pytest.raises(ValueError, match="a window is given only"):
        LayerGroup("full", (0,), 1.0, window=4)
    with pytest.raises(ValueError, match="compressed parts"):
        LayerGroup("compressed", (0,), state_bytes=1.0)


def test_full_and_mla_keep_and_read_every_token():
    for g in (FULL, LayerGroup("mla", range(4), 4 * 256.0)):
        assert (g.resident_tokens(10), g.kv_bytes(10), g.read_bytes(10)) == (10, 10_240, 10_240)
        assert window_caps((g,)) == ()
        p = plan_pages((g,), 16)
        assert (p.pages(33), p.pages_during_prefill(33, 8), p.page_bytes, p.single) == (3, 3, 16 * 1024, True)


def test_sliding_keeps_its_window():
    g = SLIDING
    assert (g.resident_tokens(100), g.kv_bytes(100), g.resident_tokens(20)) == (32, 32 * 512, 20)
    assert window_caps((g,)) == (31,)
    p = plan_pages((g,), 16)
    # 7 blocks; the first still needed holds token 100 - 32 + 1 = 69: block 4, so blocks 4..6
    assert p.pages(100) == 3 and p.groups[0].grows
    # a 100-token chunk holds ceil((100 + 31) / 16) + 1 = 10 pages, at most the prompt's 7
    assert (p.pages_during_prefill(100, 100), p.pages_during_prefill(100, 16)) == (7, 4)


def test_state_holds_one_state_whatever_the_context():
    g = STATE
    assert (g.resident_tokens(10**6), g.kv_bytes(10**6), g.read_bytes(5)) == (0, 4096, 4096)
    p = plan_pages((g,), 16)
    assert (p.page_bytes, p.groups[0].state_pages, p.pages(10**6), p.groups[0].grows) == (4096, 1, 1, False)
    assert p.pages_during_prefill(1000, 64) == 1


def test_compressed_keeps_entries_and_a_state_cache():
    g = COMPRESSED
    assert g.kv_bytes(64) == 16 * 40 + 4 * 20 + 100 == 820
    assert g.read_bytes(64) == 2 * 40 + 4 * 20 + 100 == 260  # csa: its top 2 entries
    assert window_caps((g,)) == (7, 8)  # window - 1, and topk x tokens_per_entry
    p = plan_pages((g,), 8)  # raised to lcm(4, 16) = 16 tokens
    # a page: 2 layers x (16 / 4 x 40 + 16 / 16 x 20) / 2 = 180 bytes; the state (50 B per layer) 1 page
    assert (p.block_size, p.page_bytes, p.groups[0].state_pages) == (16, 180, 1)
    assert p.pages(64) == 4 + 1 and p.pages_during_prefill(64, 16) == 5


def test_attention_terms_per_kind():
    caps = window_caps((FULL, SLIDING, STATE))
    t = AttentionTerms(len(caps))
    for g in (FULL, SLIDING):
        g.kind_spec.add_attention(t, None, g, caps, 10.0, 1)
    assert (t.ctx_bytes, t.ctx_flops, t.window_bytes, t.window_flops, t.attention_layers) == (
        1024, 40, [512], [20], 6)
    assert KINDS["full"].prefill_flops(None, FULL, 10.0, 2, 3, 1) == 10 * 4 * (3 + 4 + 5)
    assert KINDS["sliding"].prefill_flops(None, SLIDING, 10.0, 30, 4, 1) == 10 * 2 * (31 + 32 + 32 + 32)
