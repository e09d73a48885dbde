"""The rows `kvsim footprint` prints: KV per token and for N tokens, per layer group and in total, per GPU
under tensor parallelism; DeepSeek-V4's block cache and state cache apart; the page plan (pages one
sequence holds, page bytes, padding); and the fit on a device as rows, whether or not the weights fit
(then the smallest tensor-parallel size that fits says what it would hold)."""

from __future__ import annotations

from typing import Any

from kvsim.errors import KvsimError
from kvsim.specs.expert_parallel import ep_weight_bytes, expert_parallel_problem, routed_expert_total_bytes
from kvsim.specs.footprint import capacity_or_reason, format_bytes
from kvsim.specs.hardware import HardwareSpec
from kvsim.specs.layers import LayerGroup
from kvsim.specs.model import ModelSpec

TP_TRIES = (1, 2, 4, 8, 16, 32, 64)
"""Tensor-parallel sizes tried when the chosen one cannot hold the weights."""


def group_label(m: ModelSpec, g: LayerGroup, short: bool = False) -> str:
    """'32 full', '21 sliding(4096)', '24 state(mamba2)', '61 compressed(csa/4, hca/128; window 128)'
    (short: '61 compressed(csa/4,hca/128)')."""
    n = len(g.layers)
    if g.kind == "sliding":
        return f"{n} sliding({g.window})"
    if g.kind == "state":
        return f"{n} state({m.ssm_kind})"
    if g.kind == "compressed":
        parts = [f"{p.name}/{p.tokens_per_entry}" for p in g.parts if not p.name.endswith("indexer")]
        return f"{n} compressed({','.join(parts)})" if short else \
            f"{n} compressed({', '.join(parts)}; window {g.window})"
    return f"{n} {g.kind}"


def groups_summary(m: ModelSpec, kv_dtype: Any = "bf16", tp: int = 1, short: bool = False) -> str:
    """'21 full + 21 sliding(4096)' (layers with no KV, such as MLP blocks, are left out)."""
    return " + ".join(group_label(m, g, short) for g in m.layer_groups(kv_dtype, tp))


def footprint_rows(m: ModelSpec, hw: HardwareSpec, kv_dtype: Any, tp: int, gpu_memory_utilization: float,
                   block_size: int, tokens: int, ep: int | None = None,
                   lora_bytes: float = 0.0) -> list[tuple[str, str]]:
    """(what, value) rows; KvsimError only for bad inputs (an impossible tp, a bad dtype or block size, an
    expert-parallel size the model cannot split its experts over). ep: vLLM's expert parallelism over ep =
    tp x data_parallel_size GPUs (kvsim/specs/expert_parallel.py), None without.
    lora_bytes: LoRA adapter slots per GPU (`kvsim footprint --max-loras`), taken from the KV memory."""
    m.validate_tp(tp)
    if ep is not None:
        problem = expert_parallel_problem(m, tp, ep // tp) if ep % tp == 0 else (
            f"--ep {ep}: expert_parallel_size must be tensor_parallel_size ({tp}) x data_parallel_size")
        if problem:
            raise KvsimError(problem.replace("parallelism.enable_expert_parallel", f"--ep {ep}"))
    groups = m.layer_groups(kv_dtype, tp)
    per_tok = m.kv_bytes_per_token(kv_dtype, tp)
    rows = [("layer groups", groups_summary(m, kv_dtype, tp)),
            ("KV bytes per token (per GPU)", f"{per_tok:,.0f} B ({format_bytes(per_tok)})")]
    for g in groups:
        rows += _group_rows(m, g)
    rows.append((f"KV for {tokens:,} tokens (per GPU)", format_bytes(m.kv_bytes(tokens, kv_dtype, tp))))
    if len(groups) > 1 or groups[0].kind == "compressed":
        for g in groups:
            rows += _group_bytes_rows(m, g, tokens)
    if ep is None:
        rows.append(("weights per GPU", format_bytes(m.weight_bytes(tp))))
    else:
        routed = routed_expert_total_bytes(m)
        rows.append(("weights per GPU", f"{format_bytes(ep_weight_bytes(m, tp, ep))} (non-expert"
                     f" {format_bytes(m.weight_bytes(1) - routed)} / TP {tp} + routed experts"
                     f" {format_bytes(routed)} / EP {ep}; {m.num_experts // ep} experts per GPU)"))
    if lora_bytes:
        rows.append(("LoRA slots per GPU (taken from KV)", format_bytes(lora_bytes)))
    cap = capacity_or_reason(m, hw, kv_dtype, tp, gpu_memory_utilization, block_size, None,
                             expert_parallel=ep, lora_bytes=lora_bytes)
    plan = cap.plan if not isinstance(cap, str) else None
    if plan is None:
        from kvsim.specs.pages import plan_pages

        plan = plan_pages(groups, block_size)
    pages = plan.pages(tokens)
    real = plan.real_bytes(tokens)
    held = pages * plan.page_bytes
    padding = f", {100 * (1 - real / held):.1f}% padding" if held and real < held * 0.9995 else ""
    rows.append(("page plan", f"{len(plan.groups)} cache group(s) of {plan.layers_per_group} layers;"
                 f" pages of {plan.block_size} tokens, {format_bytes(plan.page_bytes)} each"))
    rows.append((f"pages one sequence of {tokens:,} tokens holds",
                 f"{pages:,} = {format_bytes(held)} ({format_bytes(real)} of KV{padding})"))
    plain = _pages_without_rules(plan, tokens)
    if plain != pages:
        rows.append(("  if every layer kept every token", f"{plain:,} pages"))
    rows += _fit_rows(m, hw, kv_dtype, tp, gpu_memory_utilization, block_size, tokens, cap, ep)
    return rows


def _group_rows(m: ModelSpec, g: LayerGroup) -> list[tuple[str, str]]:
    label = f"  {group_label(m, g)}"
    if g.kind == "state":
        return [(label, f"{format_bytes(g.state_bytes)} per sequence ({g.state_bytes:,.0f} B)")]
    if g.kind == "compressed":
        rows = [(f"  {p.name}: 1 entry per {p.tokens_per_entry} tokens"
                 + (f", top {p.topk} read" if p.topk else ""), f"{p.bytes_per_entry:,.0f} B per entry")
                for p in g.parts]
        return [(label, "block cache + state cache"), *rows,
                ("  state cache (window + tail, per sequence)", format_bytes(g.state_bytes))]
    if g.kind == "sliding":
        return [(label, f"{g.bytes_per_token:,.0f} B/token, at most {format_bytes(g.kv_bytes(g.window))}"
                        f" ({g.window:,} tokens)")]
    return [(label, f"{g.bytes_per_token:,.0f} B/token")]


def _group_bytes_rows(m: ModelSpec, g: LayerGroup, tokens: int) -> list[tuple[str, str]]:
    if g.kind == "compressed":
        block = g.kv_bytes(tokens) - g.state_bytes
        return [("  block cache (compressed entries)", format_bytes(block)),
                ("  state cache (window + tail)", format_bytes(g.state_bytes))]
    return [(f"  {group_label(m, g)}", format_bytes(g.kv_bytes(tokens)))]


def _pages_without_rules(plan, tokens: int) -> int:
    """Pages a sequence would hold if every token-paged cache group kept every block (no window)."""
    blocks = -(-tokens // plan.block_size)
    return sum(blocks if g.grows else 0 for g in plan.groups) + sum(g.state_pages for g in plan.groups)


def _fit_rows(m: ModelSpec, hw: HardwareSpec, kv_dtype: Any, tp: int, util: float, block_size: int,
              tokens: int, cap, ep: int | None = None) -> list[tuple[str, str]]:
    where = f"on {hw.name}"
    if not isinstance(cap, str):
        rows = [(f"KV capacity {where} (tp={tp}{'' if ep is None else f', ep={ep}'})",
                 f"{cap.num_pages:,} pages of {cap.tokens_per_page} tokens"
                 f" ({format_bytes(cap.usable_bytes)})"),
                (f"sequences of {tokens:,} tokens that fit", f"{cap.sequences(tokens):,}")]
        if ep is not None:
            rows.append((f"KV capacity per DP rank ({tp} GPU{'' if tp == 1 else 's'}; {ep // tp} DP ranks)",
                         f"{cap.tokens:,} token slots"))
        return rows
    budget = hw.memory_bytes * util
    weights = m.weight_bytes(tp) if ep is None else ep_weight_bytes(m, tp, ep)
    if weights > budget:
        rows = [(f"weights {where}", f"do not fit at TP {tp} ({weights / 1e9:.1f} GB > {budget / 1e9:.1f} GB"
                                     f" = memory x {util:g})")]
    else:
        rows = [(f"weights {where}", f"fit at TP {tp} ({weights / 1e9:.1f} GB), but with the activation"
                                     " reserve leave no room for KV")]
    for bigger in TP_TRIES:
        if bigger <= tp:
            continue
        try:
            m.validate_tp(bigger)
        except KvsimError:
            continue
        alt = capacity_or_reason(m, hw, kv_dtype, bigger, util, block_size, None)
        if isinstance(alt, str):
            continue
        n = alt.sequences(tokens)
        seqs = f"{n:,} sequence{'' if n == 1 else 's'}"
        pool = f"{alt.num_pages:,} pages of {alt.tokens_per_page} tokens, {format_bytes(alt.usable_bytes)}"
        rows.append((f"TP {bigger} {where}", f"fits {seqs} of {tokens:,} tokens ({pool} of KV per GPU)"))
        return rows
    rows.append((f"larger TP {where}", f"no tensor-parallel size up to {TP_TRIES[-1]} holds the weights"))
    return rows
