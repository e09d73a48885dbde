"""Speculative decoding (vLLM's `speculative_config`: ngram, eagle, eagle3, mtp, draft_model): the scenario
section, acceptance draws, and the draft's memory and compute. See docs/speculative.md. Kept import-light:
kvsim.scenario imports the config module."""
