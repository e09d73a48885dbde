"""kvsim/cost/attention.py: AttentionWork, the decode KV bytes and prefill attention FLOPs of one Batch summed
over a model's layer groups, on hand-built Batches small enough to check by hand.

Pinned: a single full / MLA group takes the classic formulas (and ignores the windowed sums); sliding layers
are charged the windowed sums (Batch.decode_window_tokens / prefill_window_pairs), full layers the whole
context; state layers 2 x state_bytes per decode sequence plus per-token state FLOPs for every token;
DeepSeek-V4's compressed group its entries (context / tokens_per_entry x bytes_per_entry), the CSA top-k
cap (topk x tokens_per_entry tokens) and its state cache once per sequence. The prefill FLOPs of the
compressed parts (each over the layers keeping it, plus the CSA indexer's scoring) are cross-checked
against kvsim/specs/compute.py.
"""

from __future__ import annotations

import pytest

from kvsim.cost.attention import AttentionWork
from kvsim.cost.batch import Batch
from kvsim.specs import compute
from kvsim.specs.catalog import get_model
from kvsim.specs.layers import window_caps

# 4 layers (0-1 sliding with an 8-token window, 2-3 full), 4 heads x 16, 2 KV heads, fp16:
# KV bytes per token and layer = 2 (K, V) * 2 heads * 16 * 2 B = 128;
# FLOPs per pair and layer = 4 * 4 heads * 16 = 256
TOY = dict(name="toy-swa", num_layers=4, hidden_size=64, num_attention_heads=4, num_kv_heads=2, head_dim=16,
           intermediate_size=128, vocab_size=100, num_params=1_000_000, active_params=1_000_000,
           attention="gqa", max_position_embeddings=4096, weight_dtype="fp16", sliding_window=8,
           sliding_window_layers=2)


def work(name, kv_dtype="bf16", tp=1) -> AttentionWork:
    return AttentionWork(get_model(name), kv_dtype, tp)


def caps_of(name, kv_dtype="bf16", tp=1) -> tuple[int, ...]:
    return window_caps(get_model(name).layer_groups(kv_dtype, tp))


def decode_batch(contexts, caps) -> Batch:
    """A Batch of decode sequences at these contexts, the windowed sums computed by brute force."""
    return Batch(num_seqs=len(contexts), decode_seqs=len(contexts), decode_context_tokens=sum(contexts),
                 decode_window_tokens=tuple(sum(min(c, cap) for c in contexts) for cap in caps))


def prefill_batch(chunks, caps, decode_seqs=0) -> Batch:
    """A Batch of prefill chunks (start, size), pairs and windowed pairs summed by brute force."""
    pairs = sum(i for s, c in chunks for i in range(s + 1, s + c + 1))
    windowed = tuple(float(sum(min(i, cap + 1) for s, c in chunks for i in range(s + 1, s + c + 1)))
                     for cap in caps)
    return Batch(num_seqs=len(chunks) + decode_seqs, prefill_seqs=len(chunks),
                 prefill_tokens=sum(c for _, c in chunks), prefill_attn_pairs=float(pairs),
                 decode_seqs=decode_seqs, prefill_window_pairs=windowed)


# ----------------------------------------------------------------- (a) one full / MLA group: classic formulas
def test_full_attention_model_takes_the_classic_formulas():
    a = work("llama-2-7b", "fp16")
    # 32 layers x 2 (K, V) x 32 KV heads x 128 x 2 B = 524,288 B per token; 4 x 32 heads x 128 x 32 layers
    # = 524,288 FLOPs per pair
    assert (a.kv_bytes_per_token, a.flops_per_pair, a.grouped) == (524_288, 524_288, False)
    assert caps_of("llama-2-7b", "fp16") == ()
    # 3 decode sequences of 100 + 200 + 700 = 1,000 context tokens -> 524,288,000 B
    b = Batch(num_seqs=3, decode_seqs=3, decode_context_tokens=1000)
    assert a.decode_bytes(b) == 1000 * 524_288 == 524_288_000
    # a chunk of 10 after 90: 10 x 90 + 10 x 11 / 2 = 955 pairs -> 500,695,040 FLOPs
    b = Batch(num_seqs=1, prefill_seqs=1, prefill_tokens=10, prefill_attn_pairs=955.0)
    assert a.prefill_flops(b) == 955 * 524_288 == 500_695_040


def test_full_attention_model_ignores_windowed_sums_and_state_terms():
    a = work("llama-2-7b", "fp16")
    b = Batch(num_seqs=2, prefill_seqs=1, prefill_tokens=10, prefill_attn_pairs=955.0, decode_seqs=1,
              decode_context_tokens=1000, decode_window_tokens=(7,), prefill_window_pairs=(9.0,))
    assert a.decode_bytes(b) == 524_288_000
    assert a.prefill_flops(b) == 500_695_040  # no per-token state FLOPs for the decode sequence


def test_full_attention_under_tensor_parallelism_splits_heads():
    a = work("llama-2-7b", "fp16", tp=2)
    # 16 KV heads and 16 query heads per GPU: both coefficients halve to 262,144
    assert (a.kv_bytes_per_token, a.flops_per_pair) == (262_144, 262_144)
    b = Batch(num_seqs=1, decode_seqs=1, decode_context_tokens=1000, prefill_attn_pairs=955.0)
    assert a.decode_bytes(b) == 262_144_000
    assert a.prefill_flops(b) == 955 * 262_144


def test_mla_model_takes_the_classic_formulas():
    a = work("deepseek-v2-lite")
    # 27 layers x (512 latent + 64 rope) x 2 B = 31,104 B per token; 2 x 16 heads x (2 x 128 + 64) x 27 layers
    # = 276,480 FLOPs per pair
    assert (a.kv_bytes_per_token, a.flops_per_pair, a.grouped) == (31_104, 276_480, False)
    b = Batch(num_seqs=2, decode_seqs=2, decode_context_tokens=500, prefill_attn_pairs=55.0)
    assert a.decode_bytes(b) == 500 * 31_104 == 15_552_000
    assert a.prefill_flops(b) == 55 * 276_480 == 15_206_400


# ----------------------------------------------------------------- (b) every layer sliding: mistral-7b
def test_mistral_decode_reads_the_window_not_the_context():
    a = work("mistral-7b")
    # 32 sliding layers x 2 x 8 KV heads x 128 x 2 B = 131,072 B per token; window 4096 -> cap 4095
    assert caps_of("mistral-7b") == (4095,)
    assert (a.ctx_bytes, a.window_bytes, a.grouped) == (0.0, [131_072.0], True)
    # contexts 100, 4095, 9000: min(., 4095) sums to 100 + 4095 + 4095 = 8,290 -> 1,086,586,880 B
    b = decode_batch([100, 4095, 9000], (4095,))
    assert b.decode_window_tokens == (8290,)
    assert a.decode_bytes(b) == 131_072 * 8290 == 1_086_586_880


def test_mistral_decode_bytes_do_not_depend_on_the_context_sum():
    a = work("mistral-7b")
    one = Batch(num_seqs=3, decode_seqs=3, decode_context_tokens=13_195, decode_window_tokens=(8290,))
    other = Batch(num_seqs=3, decode_seqs=3, decode_context_tokens=999_999, decode_window_tokens=(8290,))
    assert a.decode_bytes(one) == a.decode_bytes(other) == 1_086_586_880


def test_mistral_prefill_attends_pairs_within_the_window():
    a = work("mistral-7b")
    m = get_model("mistral-7b")
    # a chunk of 10 after 4090: queries i = 4091..4100 see min(i, 4096) keys:
    # 4091 + ... + 4096 = 24,561, plus 4 x 4096 = 16,384 -> 40,945 windowed pairs (causal would be 40,955)
    b = prefill_batch([(4090, 10)], (4095,))
    assert (b.prefill_attn_pairs, b.prefill_window_pairs) == (40_955.0, (40_945.0,))
    assert compute.window_pairs(4090, 10, 4096) == 40_945
    # 4 x 32 heads x 128 = 16,384 FLOPs per pair and layer, x 32 layers = 524,288
    assert a.prefill_flops(b) == 524_288 * 40_945 == 21_466_972_160
    assert a.prefill_flops(b) == sum(m.prefill_attention_flops(4090, 10).values())


# ----------------------------------------------------------------- (c) half sliding, half full
def test_half_sliding_toy_splits_decode_bytes_between_context_and_window():
    a = AttentionWork(get_model(TOY), "fp16", 1)
    # full group: 2 layers x 128 = 256 B per token; sliding group: the same, window 8 -> cap 7
    assert (a.ctx_bytes, a.window_bytes) == (256.0, [256.0])
    # contexts 3 and 20: context sum 23, min(., 7) sum 3 + 7 = 10 -> 256 x 23 + 256 x 10 = 8,448 B
    b = decode_batch([3, 20], (7,))
    assert (b.decode_context_tokens, b.decode_window_tokens) == (23, (10,))
    assert a.decode_bytes(b) == 256 * 23 + 256 * 10 == 8448


def test_half_sliding_toy_prefill_flops():
    m = get_model(TOY)
    a = AttentionWork(m, "fp16", 1)
    # a chunk of 5 after 6: causal pairs 5 x 6 + 15 = 45; windowed (8 keys) min(i, 8), i = 7..11:
    # 7 + 8 + 8 + 8 + 8 = 39. 256 FLOPs per pair and layer, 2 layers each: 512 x 45 + 512 x 39 = 43,008
    b = prefill_batch([(6, 5)], (7,))
    assert (b.prefill_attn_pairs, b.prefill_window_pairs) == (45.0, (39.0,))
    assert a.prefill_flops(b) == 512 * 45 + 512 * 39 == 43_008
    assert a.prefill_flops(b) == sum(m.prefill_attention_flops(6, 5).values())


def test_gpt_oss_20b_splits_bytes_and_flops_between_its_groups():
    a = work("gpt-oss-20b")
    # 12 full + 12 sliding (window 128 -> cap 127) layers, each 2 x 8 KV heads x 64 x 2 B = 2,048 B per
    # token: 24,576 B per token in each group
    assert caps_of("gpt-oss-20b") == (127,)
    assert (a.ctx_bytes, a.window_bytes) == (24_576.0, [24_576.0])
    # contexts 50 and 1000: 24,576 x 1,050 + 24,576 x (50 + 127) = 24,576 x 1,227 = 30,154,752 B
    b = decode_batch([50, 1000], (127,))
    assert a.decode_bytes(b) == 24_576 * 1227 == 30_154_752
    # a chunk of 200 from 0: causal 200 x 201 / 2 = 20,100; windowed (128 keys) 128 x 129 / 2 + 72 x 128
    # = 8,256 + 9,216 = 17,472. 4 x 64 heads x 64 = 16,384 FLOPs per pair and layer, x 12 layers each:
    # 196,608 x (20,100 + 17,472) = 7,386,955,776
    b = prefill_batch([(0, 200)], (127,))
    assert b.prefill_window_pairs == (17_472.0,)
    assert a.prefill_flops(b) == 196_608 * (20_100 + 17_472) == 7_386_955_776
    assert a.prefill_flops(b) == sum(get_model("gpt-oss-20b").prefill_attention_flops(0, 200).values())


def test_sliding_window_costs_match_the_full_formulas_below_the_window():
    # every context below the cap: the windowed sums equal the plain ones, so a half-sliding model costs
    # what it would with every layer full (48 layers' worth of KV bytes per token)
    a = work("gpt-oss-20b")
    b = decode_batch([10, 100, 127], (127,))
    assert a.decode_bytes(b) == 49_152 * 237
    b = prefill_batch([(0, 60), (20, 40)], (127,))
    assert a.prefill_flops(b) == 16_384 * 24 * b.prefill_attn_pairs


# ----------------------------------------------------------------- (d) state layers: nemotron-h-8b
def test_nemotron_h_decode_charges_the_state_twice_per_sequence():
    a = work("nemotron-h-8b")
    # 4 attention layers x 2 x 8 KV heads x 128 x 2 B = 16,384 B per token. 24 Mamba-2 layers: conv_dim =
    # 128 heads x 64 + 2 x 8 groups x 128 = 10,240; conv state 3 x 10,240 = 30,720 and recurrent state
    # 128 x 64 x 128 = 1,048,576 elements, at 2 B: 2,158,592 B per layer, 51,806,208 B over the 24 layers
    assert caps_of("nemotron-h-8b") == ()
    assert (a.ctx_bytes, a.seq_bytes) == (16_384.0, 2 * 51_806_208.0)
    # 3 sequences of 100 + 200 + 300 = 600 tokens: 16,384 x 600 + 3 x 2 x 51,806,208 = 320,667,648 B
    b = Batch(num_seqs=3, decode_seqs=3, decode_context_tokens=600)
    assert a.decode_bytes(b) == 16_384 * 600 + 3 * 2 * 51_806_208 == 320_667_648


def test_nemotron_h_state_flops_go_with_every_token():
    m = get_model("nemotron-h-8b")
    a = work("nemotron-h-8b")
    # per token and state layer: 4 x 1,048,576 (update and read-out) + 2 x 4 (kernel) x 10,240 (conv_dim)
    # = 4,194,304 + 81,920 = 4,276,224 FLOPs; x 24 layers = 102,629,376
    assert compute.state_flops_per_token(m, 1) == 4_276_224
    assert a.token_flops == 24 * 4_276_224 == 102_629_376
    # 4 x 32 heads x 128 = 16,384 FLOPs per pair and layer, 4 attention layers: 65,536 per pair
    # a chunk of 100 from 0 (5,050 pairs) and 3 decode sequences: 65,536 x 5,050 + 102,629,376 x 103
    b = prefill_batch([(0, 100)], (), decode_seqs=3)
    assert b.prefill_attn_pairs == 5050.0
    assert a.prefill_flops(b) == 65_536 * 5050 + 102_629_376 * 103 == 10_901_782_528
    # the prefill part alone agrees with the per-kind FLOPs of kvsim/specs/compute.py
    b = prefill_batch([(0, 100)], ())
    assert a.prefill_flops(b) == sum(m.prefill_attention_flops(0, 100).values())


def test_nemotron_h_decode_only_batch_still_pays_state_flops():
    a = work("nemotron-h-8b")
    b = Batch(num_seqs=2, decode_seqs=2, decode_context_tokens=50)
    assert a.prefill_flops(b) == 2 * 102_629_376


# ----------------------------------------------------------------- (e) compressed: deepseek-v4-flash
# 43 layers: 21 CSA (ratio 4), 20 HCA (ratio 128), 2 sliding-only; a 128-token window on every layer.
# Entry = (448 latent + 64 rope) x 2 B = 1,024 B per layer; indexer key 128 x 2 B = 256 B per CSA layer.
#   csa:         bytes_per_entry 21 x 1,024 = 21,504 per 4 tokens (5,376 B per token), topk 512 -> cap 2,048
#   csa-indexer: 21 x 256 = 5,376 per 4 tokens (1,344 B per token), all read
#   hca:         20 x 1,024 = 20,480 per 128 tokens (160 B per token)
#   state:       128 x 1,024 x 43 + 3 x 21,504 + 3 x 5,376 + 127 x 20,480 = 8,317,696 B
# FLOPs per pair and layer: 2 x 64 heads x ((448 + 64) + 512) = 131,072
V4_STATE = 8_317_696
V4_PAIR = 131_072


def test_deepseek_v4_groups_as_hand_computed():
    (g,) = get_model("deepseek-v4-flash").layer_groups("bf16")
    parts = {p.name: (p.tokens_per_entry, p.bytes_per_entry, p.topk) for p in g.parts}
    assert parts == {"csa": (4, 21_504, 512), "csa-indexer": (4, 5376, 0), "hca": (128, 20_480, 0)}
    assert g.state_bytes == 128 * 1024 * 43 + 3 * 21_504 + 3 * 5376 + 127 * 20_480 == V4_STATE
    assert caps_of("deepseek-v4-flash") == (127, 2048)
    assert compute.layer_pair_flops(get_model("deepseek-v4-flash"), 1) == V4_PAIR


def test_deepseek_v4_decode_charges_entries_topk_cap_and_state():
    a = work("deepseek-v4-flash")
    assert (a.ctx_bytes, a.window_bytes, a.seq_bytes) == (1344 + 160, [0.0, 5376.0], V4_STATE)
    # contexts 1,024 and 8,192: context sum 9,216, top-k capped sum min(., 2048) = 1,024 + 2,048 = 3,072
    #   csa     5,376 x 3,072 = 16,515,072  (256 + 512 entries of 21,504 B: the second at its top-k)
    #   indexer 1,344 x 9,216 = 12,386,304  (256 + 2,048 entries of 5,376 B)
    #   hca       160 x 9,216 =  1,474,560  (8 + 64 entries of 20,480 B)
    #   state   8,317,696 once per sequence, x 2 sequences = 16,635,392
    # total 47,011,328 B
    b = decode_batch([1024, 8192], (127, 2048))
    assert b.decode_window_tokens == (254, 3072)
    assert a.decode_bytes(b) == 16_515_072 + 12_386_304 + 1_474_560 + 16_635_392 == 47_011_328
    # contexts that are whole entries of every part: exactly the group's per-sequence read_bytes
    (g,) = get_model("deepseek-v4-flash").layer_groups("bf16")
    assert a.decode_bytes(b) == g.read_bytes(1024) + g.read_bytes(8192)


def test_deepseek_v4_topk_cap_bounds_the_csa_reads():
    a = work("deepseek-v4-flash")
    # past 2,048 tokens the CSA part reads its 512 top-k entries whatever the context: 512 x 21,504 B
    long, longer = decode_batch([4096], (127, 2048)), decode_batch([65_536], (127, 2048))
    assert a.decode_bytes(longer) - a.decode_bytes(long) == (1344 + 160) * (65_536 - 4096)
    assert a.decode_bytes(long) == 512 * 21_504 + 1504 * 4096 + V4_STATE


def test_deepseek_v4_decode_charges_entries_as_a_fraction_of_the_context():
    a = work("deepseek-v4-flash")
    # context 100 (not a whole HCA entry): 5,376 x 100 + 1,344 x 100 + 160 x 100 + state = 9,005,696 B;
    # the per-sequence read_bytes counts complete entries only (25 x 21,504 + 25 x 5,376 + 0 + state)
    b = decode_batch([100], (127, 2048))
    assert a.decode_bytes(b) == (5376 + 1344 + 160) * 100 + V4_STATE == 9_005_696
    (g,) = get_model("deepseek-v4-flash").layer_groups("bf16")
    assert g.read_bytes(100) == 25 * 21_504 + 25 * 5376 + V4_STATE == 8_989_696


def test_deepseek_v4_prefill_window_pairs_on_every_layer():
    a = work("deepseek-v4-flash")
    # the 128-token window is attended on all 43 layers: a windowed-pair coefficient of 43 x 131,072
    assert a.window_flops[0] == 43 * V4_PAIR == 5_636_096
    b = Batch(num_seqs=1, prefill_seqs=1, prefill_tokens=10, prefill_window_pairs=(1000.0, 0.0))
    assert a.prefill_flops(b) == 1000 * 43 * V4_PAIR


def test_deepseek_v4_csa_pairs_count_only_the_csa_layers():
    a = work("deepseek-v4-flash")
    # 4,000 pairs at the top-k cap are 4,000 / 4 = 1,000 CSA entry pairs in each of the 21 CSA layers:
    # 1,000 x 21 x 131,072 = 2,752,512,000 FLOPs
    b = Batch(num_seqs=1, prefill_seqs=1, prefill_tokens=10, prefill_window_pairs=(0.0, 4000.0))
    assert a.prefill_flops(b) == 1000 * 21 * V4_PAIR == 2_752_512_000


def test_deepseek_v4_context_pairs_charge_hca_layers_and_the_indexer():
    a = work("deepseek-v4-flash")
    # per causal pair: HCA 20 layers x 131,072 / 128 = 20,480; indexer 21 layers x 2 x 64 x 128 / 4 = 86,016
    # -> 106,496 FLOPs
    b = Batch(num_seqs=1, prefill_seqs=1, prefill_tokens=10, prefill_attn_pairs=12_800.0)
    assert a.prefill_flops(b) == 12_800 * (20_480 + 86_016)


def test_deepseek_v4_prefill_flops_agree_with_compute():
    m = get_model("deepseek-v4-flash")
    a = work("deepseek-v4-flash")
    b = prefill_batch([(0, 8192)], (127, 2048))
    assert a.prefill_flops(b) == pytest.approx(sum(m.prefill_attention_flops(0, 8192).values()), rel=1e-2)

