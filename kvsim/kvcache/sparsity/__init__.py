"""Token-level KV sparsity: an attention model, eviction/offload policies (StreamingLLM, H2O, SnapKV,
ScissorHands, PyramidKV, InfiniGen), paging interplay, and the scheduler that applies them. See
docs/sparsity.md. Kept import-light: kvsim.scenario imports the config module."""
