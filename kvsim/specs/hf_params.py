"""Parameter counts (total, active) from a Hugging Face config.json's shapes, per layer and family.

A config does not carry its parameter count, so spec_from_hf_config estimates it by adding up the
weights each layer of the family builds (as the transformers / vLLM modelling code does):

- attention: Q/K/V/O (Qwen2: Q/K/V biases; gpt-oss and Llama with attention_bias: O bias too; gpt-oss:
  one sink logit per head; Qwen3-Next: a Q projection twice as wide, for its output gate; Gemma-3 and
  Qwen3-Next: Q/K norms of head_dim), or MLA (low-rank Q when q_lora_rank, the latent down-projection
  with its norm, the K/V up-projection, O), or DeepSeek-V4 (low-rank Q, one shared KV of head_dim, a
  per-head sink, grouped low-rank O; each compressed layer's compressor, CSA layers' indexer);
- state layers: Mamba-2 (in_proj to 2 * d_inner + 2 * groups * state + heads, depthwise conv with bias,
  dt_bias, A_log, D, gated norm, out_proj) or Gated DeltaNet (in_proj_qkvz, in_proj_ba, conv, dt_bias,
  A_log, norm, out_proj);
- MLP: gated (3 matrices) or plain (2: OPT, Nemotron-H's relu2), or MoE (routed experts, shared experts,
  router; gpt-oss: expert and router biases; Qwen3-Next: a shared-expert gate);
- norms: 2 per layer (Gemma-2/3: 4; Nemotron-H: 1 per block), a final one, and the embeddings (once when
  tied).

Exact for Llama 2/3, Mistral, Qwen2, DeepSeek-V2-Lite and Gemma-2; within 0.1% for OPT (its biases,
LayerNorm betas and positional table are approximated); the new families are compared with their
published totals in tests/specs/test_catalog.py.
"""

from __future__ import annotations

from typing import Any


def estimate_params(cfg: dict[str, Any], kinds: tuple[str, ...], layers: int, h: int, heads: int,
                    kv_heads: int, head_dim: int, ffn: int, vocab: int) -> tuple[int, int]:
    """(total, active) parameters; kinds: the layer kinds (LAYER_KINDS), one per layer."""
    family = cfg.get("model_type", "")
    attn = _attention(cfg, family, h, heads, kv_heads, head_dim)
    experts, per_tok = routed_experts(cfg)
    mats = 2 if family in ("opt", "nemotron_h") or "ffn_dim" in cfg else 3
    norms = 4 if family in ("gemma2", "gemma3", "gemma3_text") else 1 if family == "nemotron_h" else 2
    dense_mlp = mats * h * ffn
    moe_total, moe_active = _moe(cfg, family, h, ffn, mats, experts, per_tok)
    pattern = cfg.get("hybrid_override_pattern") if family == "nemotron_h" else None
    moe = set(moe_layers(cfg, len(kinds)))
    total = active = 0
    for i, kind in enumerate(kinds):
        mixer = _mixer(cfg, kind, i, attn, h, heads, head_dim)
        if i in moe:
            mlp = (moe_total, moe_active)
        elif pattern is not None and pattern[i] != "-":  # Nemotron-H: a mixer block has no MLP
            mlp = (0, 0)
        else:
            mlp = (dense_mlp, dense_mlp)
        total += mixer + mlp[0] + norms * h
        active += mixer + mlp[1] + norms * h
    embed = vocab * h * (1 if cfg.get("tie_word_embeddings") else 2) + h
    if cfg.get("compress_ratios") is not None:  # DeepSeek-V4 hyper-connections (hc_mult streams)
        hc = cfg.get("hc_mult") or 1
        mix = (2 + hc) * hc
        per_layer = 2 * (mix * hc * h + mix + 3)
        total += layers * per_layer
        active += layers * per_layer
    return total + embed, active + embed


def routed_experts(cfg: dict[str, Any]) -> tuple[int, int]:
    """(routed experts per MoE layer, experts per token) of a config, (0, 0) for a dense model: the keys
    n_routed_experts (DeepSeek, Nemotron-H) / num_local_experts (gpt-oss, Mixtral) / num_experts (Qwen MoE)
    and num_experts_per_tok / experts_per_token."""
    experts = cfg.get("n_routed_experts") or cfg.get("num_local_experts") or cfg.get("num_experts") or 0
    per_tok = cfg.get("num_experts_per_tok") or cfg.get("experts_per_token") or 0
    return (experts, per_tok) if experts and per_tok else (0, 0)


def moe_layers(cfg: dict[str, Any], layers: int) -> tuple[int, ...]:
    """Indices of the layers whose MLP is a mixture of experts (none for a dense config):
    Nemotron-H: its `E` blocks (hybrid_override_pattern); otherwise layer i is MoE when i >=
    first_k_dense_replace (DeepSeek: the first k layers are dense), i is a multiple of moe_layer_freq
    (DeepSeek, default 1), (i + 1) is a multiple of decoder_sparse_step (Qwen2/3-MoE, default 1) and i is
    not in mlp_only_layers (Qwen MoE)."""
    if routed_experts(cfg) == (0, 0):
        return ()
    if cfg.get("model_type") == "nemotron_h" and cfg.get("hybrid_override_pattern") is not None:
        return tuple(i for i, block in enumerate(cfg["hybrid_override_pattern"]) if block == "E")
    first = cfg.get("first_k_dense_replace") or 0
    freq = cfg.get("moe_layer_freq") or 1
    step = cfg.get("decoder_sparse_step") or 1
    dense = set(cfg.get("mlp_only_layers") or ())
    return tuple(i for i in range(layers)
                 if i >= first and i % freq == 0 and (i + 1) % step == 0 and i not in dense)


def shared_expert_width(cfg: dict[str, Any], ffn: int) -> tuple[int, int]:
    """(shared experts, their summed intermediate width) of one MoE layer: n_shared_experts of the routed
    experts' moe_intermediate_size (else ffn, the config's intermediate size; DeepSeek: run as one MLP of
    that width), plus one of shared_expert_intermediate_size / moe_shared_expert_intermediate_size (Qwen
    MoE, Qwen3-Next, Nemotron-H) where the config gives it."""
    if routed_experts(cfg) == (0, 0):
        return 0, 0
    eff = cfg.get("moe_intermediate_size") or ffn
    n = cfg.get("n_shared_experts") or 0
    extra = (cfg.get("shared_expert_intermediate_size") or cfg.get("moe_shared_expert_intermediate_size")
             or 0)
    return n + (1 if extra else 0), n * eff + extra


def _attention(cfg: dict[str, Any], family: str, h: int, heads: int, kv: int, hd: int) -> int:
    """Parameters of one standard (full or sliding) attention layer."""
    if cfg.get("kv_lora_rank"):
        r, rope = cfg["kv_lora_rank"], cfg.get("qk_rope_head_dim") or 0
        nope, v = cfg.get("qk_nope_head_dim") or hd, hd
        q_rank = cfg.get("q_lora_rank")
        q = (h * q_rank + q_rank + q_rank * heads * (nope + rope)) if q_rank else h * heads * (nope + rope)
        return q + h * (r + rope) + r + r * heads * (nope + v) + heads * v * h
    if cfg.get("compress_ratios") is not None:
        return _v4_attention(cfg, h, heads, hd)
    q_width = 2 if family == "qwen3_next" else 1  # Qwen3-Next's Q projection carries the output gate
    attn = (1 + q_width) * h * heads * hd + 2 * h * kv * hd
    if cfg.get("attention_bias") or family == "qwen2":
        attn += (heads + 2 * kv) * hd
        if family in ("llama", "gpt_oss"):
            attn += h  # O bias
    if family == "gpt_oss":
        attn += heads  # sinks
    if family in ("gemma3", "gemma3_text", "qwen3_next"):
        attn += 2 * hd  # q_norm, k_norm
    return attn


def _v4_attention(cfg: dict[str, Any], h: int, heads: int, hd: int) -> int:
    q_rank = cfg.get("q_lora_rank") or 0
    o_rank = cfg.get("o_lora_rank") or 0
    groups = cfg.get("o_groups") or 1
    q = h * q_rank + q_rank + q_rank * heads * hd if q_rank else h * heads * hd
    o = heads * hd * o_rank + groups * o_rank * h if o_rank else heads * hd * h
    return q + h * hd + hd + heads + o


def _mixer(cfg: dict[str, Any], kind: str, i: int, attn: int, h: int, heads: int, hd: int) -> int:
    """Parameters of layer i's sequence mixer."""
    if kind in ("full", "mla", "sliding"):
        return attn
    if kind == "state":
        return _mamba2(cfg, h) if cfg.get("model_type") == "nemotron_h" else _gated_deltanet(cfg, h)
    if kind == "compressed":
        ratio = cfg["compress_ratios"][i]
        total = attn + _compressor(h, hd, ratio)
        if ratio == min(r for r in cfg["compress_ratios"] if r) and cfg.get("index_head_dim"):
            ih, ihd = cfg.get("index_n_heads") or 0, cfg["index_head_dim"]
            total += (cfg.get("q_lora_rank") or h) * ih * ihd + h * ih + _compressor(h, ihd, ratio)
        return total
    return 0


def _compressor(h: int, dim: int, ratio: int) -> int:
    """A DeepSeek-V4 compressor: KV and gate projections (doubled for the overlapping ratio-4 windows),
    the learned position offsets, a norm."""
    width = (2 if ratio == 4 else 1) * dim
    return 2 * h * width + ratio * width + dim


def _mamba2(cfg: dict[str, Any], h: int) -> int:
    heads, hd = cfg["mamba_num_heads"], cfg["mamba_head_dim"]
    g, n, k = cfg.get("n_groups") or 1, cfg["ssm_state_size"], cfg.get("conv_kernel") or 4
    inner = heads * hd
    conv_dim = inner + 2 * g * n
    bias = bool(cfg.get("use_bias") or cfg.get("mamba_proj_bias"))
    in_proj = h * (inner + conv_dim + heads) + (inner + conv_dim + heads if bias else 0)
    conv = conv_dim * k + (conv_dim if cfg.get("use_conv_bias", True) else 0)
    out_proj = inner * h + (h if bias else 0)
    return in_proj + conv + 3 * heads + inner + out_proj


def _gated_deltanet(cfg: dict[str, Any], h: int) -> int:
    kh, kd = cfg["linear_num_key_heads"], cfg["linear_key_head_dim"]
    vh, vd = cfg["linear_num_value_heads"], cfg["linear_value_head_dim"]
    k = cfg.get("linear_conv_kernel_dim") or 4
    key, value = kh * kd, vh * vd
    conv_dim = 2 * key + value
    return h * (2 * key + 2 * value) + h * 2 * vh + conv_dim * k + 2 * vh + vd + value * h


def _moe(cfg: dict[str, Any], family: str, h: int, ffn: int, mats: int, experts: int,
         per_tok: int) -> tuple[int, int]:
    """(total, active) parameters of one MoE MLP."""
    if not (experts and per_tok):
        return 0, 0
    eff = cfg.get("moe_intermediate_size") or ffn
    expert = mats * h * eff
    if family == "gpt_oss":
        expert += 2 * eff + h  # gate_up and down biases
    shared = (cfg.get("n_shared_experts") or 0) * expert
    shared_i = (cfg.get("shared_expert_intermediate_size") or cfg.get("moe_shared_expert_intermediate_size")
                or 0)
    shared += mats * h * shared_i
    if family == "qwen3_next" and shared_i:
        shared += h  # shared_expert_gate
    router = h * experts + (experts if family == "gpt_oss" else 0)
    return shared + router + experts * expert, shared + router + per_tok * expert
