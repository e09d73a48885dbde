"""One manager per cache group of a model (kvsim/specs/pages.py), all drawing pages from one pool:
`TokenTables` for KV that grows with the context (full, MLA, compressed), `SlidingTables` for
sliding-window layers (pages that leave the window go back), `StateSlots` for fixed per-sequence state
(Mamba / linear attention). kvsim/kvcache/coordinator.py puts them behind the scheduler's interface."""
