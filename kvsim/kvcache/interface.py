"""The interface the engine uses to talk to a KV manager (paged, prefix-caching, contiguous, the coordinator
of a model with several layer groups). Every capability is a member: the engine never probes with
getattr / hasattr; a manager without a feature answers its neutral value (no evictions, no refusal)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kvsim.kvcache.view import ContextSums, Hit

if TYPE_CHECKING:
    from kvsim.kvcache.tiers import TierChain


class KVManager(Protocol):
    """What the scheduler and the engine may call. Sequences are ints; token counts are totals per sequence.

    Accounting contract: `used_blocks` counts blocks (pages) referenced by sequences; token states (slots
    holding real KV) = `token_states(sums)`; `cow_copies` only grows; `num_free_blocks` counts evictable
    cached blocks as free.
    """

    block_size: int
    shared_dup_tokens: int
    cow_copies: int
    windows: tuple[int, ...]
    """Window caps (sliding layers' window - 1, ...) the manager's token states read ContextSums.windowed
    at; () if none. When not (), equal to the model's (SchedulerLimits.windows)."""
    block_pages: int
    """Blocks (pages) a sequence's next block of tokens may take: 1, the coordinator one per token-paged cache
    group (what a swapped-out group must find free for each sequence's next token)."""
    last_grow_delta: int
    """Blocks the last successful grow_one_block added (1 for a one-group manager)."""
    tiers: TierChain | None
    """The KV tiers below the GPU cache (kvsim/kvcache/tiers.py), or None where there are none (every
    manager but a hash prefix cache built with kv.tiers)."""

    @property
    def num_blocks(self) -> int: ...
    @property
    def num_free_blocks(self) -> int: ...
    @property
    def used_blocks(self) -> int: ...
    @property
    def cached_blocks(self) -> int:
        """Blocks with refcount 0 kept for prefix reuse (evictable); 0 without a prefix cache."""
        ...
    @property
    def evictions(self) -> int:
        """Cached blocks evicted so far; 0 without a prefix cache."""
        ...

    # ---- admission -------------------------------------------------------------------------------
    def refuse_reason(self, req, output_tokens: int) -> str | None:
        """Why the request can never be admitted by this manager (beyond the pool-size check the engine
        makes), or None."""
        ...

    def admit(self, seq: int, req, prompt_tokens: int, output_tokens: int) -> Hit:
        """Called before a waiting request's first chunk: the prompt tokens already cached (their blocks
        are then mapped into seq's table), NO_HIT for managers without a prefix cache. May be called
        again for the same request if it is not admitted this iteration."""
        ...

    def peek_hit(self, req, prompt_tokens: int) -> Hit:
        """What `admit` would find cached now (tokens, by tier), with no side effect (KVView.hit)."""
        ...

    # ---- growth ----------------------------------------------------------------------------------
    def has(self, seq: int) -> bool: ...
    def blocks_needed(self, seq: int, num_tokens: int) -> int: ...
    def group_blocks_needed(self, seqs: list[int], num_tokens: int) -> int: ...
    def allocate(self, seq: int, num_tokens: int) -> bool: ...
    def reserve(self, seq: int, num_tokens: int) -> bool:
        """allocate() for slots whose KV has not arrived yet (a load from the tiers, a transfer from a
        prefill replica): the blocks are held, but not offered to the prefix cache (other requests cannot
        hit them) until a later allocate() of seq, when the KV is there."""
        ...
    def grow_one_block(self, seq: int, num_tokens: int) -> bool: ...
    def grow_each(self, seqs: list[int], num_tokens: list[int]) -> bool:
        """grow_one_block for each of seqs, all at once or (False) none."""
        ...
    def capacity_tokens(self, seq: int) -> int: ...
    def last_block_shared(self, seq: int) -> bool: ...
    def num_blocks_of(self, seq: int) -> int: ...
    def private_blocks(self, seq: int) -> int:
        """Blocks of seq that nothing else references: what free(seq) gives back."""
        ...

    # ---- sharing, freeing, swapping --------------------------------------------------------------
    def fork(self, parent: int, child: int) -> None: ...
    def reparent(self, seq: int, parent: int) -> None:
        """Beam search: existing seq continues from parent (paged: a share of parent's table)."""
        ...
    def set_computed_tokens(self, seq: int, num_tokens: int) -> None:
        """Before free(seq): seq's tokens with KV are num_tokens (vLLM's num_computed_tokens), at most
        the slots it holds (blocks grown ahead, speculative decoding's draft and lookahead slots). A prefix
        cache then registers at free exactly the floor(num_tokens / block_size) blocks full of them, the
        last one included when it is exactly full (without this call: every block of the table but the
        last); managers without one ignore it."""
        ...

    def free(self, seq: int) -> int: ...
    def can_swap_out(self, seqs: list[int]) -> bool: ...
    def swap_out(self, seqs: list[int]) -> int: ...
    def swap_blocks_needed(self, seqs: list[int]) -> int: ...
    def swap_in(self, seqs: list[int]) -> int: ...

    # ---- accounting ------------------------------------------------------------------------------
    def token_states(self, sums: ContextSums) -> int:
        """Slots holding real KV, from the scheduler's sums over its sequences."""
        ...

    def breakdown(self, token_states: int, table_blocks: int, head_req=None,
                  head_output: int = 0) -> tuple[int, int, int, int, int]:
        """The kv_* breakdown columns (kvsim/kvcache/breakdown.py): reservation, internal and external
        fragmentation, free (with token_states they sum to the capacity in slots), unshared blocks.
        table_blocks: the sum of the sequences' table lengths (the scheduler keeps it); head_req /
        head_output: the request at the head of the waiting queue (None when nothing waits)."""
        ...

    def check_invariants(self) -> int:
        """Raise AssertionError unless the manager's state is consistent; return the entries the pass read
        (blocks with state, table entries, tier keys, ...): its cost, by which check mode spaces its full
        checks (kvsim/engine/check_pacing.py)."""
        ...
