"""Contiguous KV layouts of pre-paging engines (FasterTransformer, Orca): one region per sequence, reserved
whole at admission in a contiguous address space, so reservation, internal and external fragmentation are
real."""

from __future__ import annotations

from kvsim.kvcache.address_space import AddressSpace
from kvsim.kvcache.buddy import BuddySpace, ceil_pow2
from kvsim.kvcache.view import NO_HIT, Hit

POLICIES: tuple[str, ...] = ("max", "pow2", "oracle")


def next_pow2(x: int) -> int:
    """Smallest power of two >= x (x >= 1)."""
    return 1 << (max(x, 1) - 1).bit_length()


def reservation_slots(policy: str, prompt: int, output: int, max_model_len: int) -> int:
    """Token slots a contiguous layout reserves for one sequence of `prompt` + `output` tokens.

    max: max_model_len (Orca "Max", FasterTransformer). pow2: the prompt plus the next power of two of the
    output, at most max_model_len (Orca "Pow2": over-reserves the output by less than 2x). oracle: prompt +
    output exactly (Orca "Oracle")."""
    if policy == "max":
        return max_model_len
    if policy == "pow2":
        return prompt + min(next_pow2(output), max(max_model_len - prompt, output))
    if policy == "oracle":
        return prompt + output
    raise ValueError(f"unknown contiguous policy {policy!r} (known: {', '.join(POLICIES)})")


def final_slots(prompt: int, output: int) -> int:
    """KV slots a sequence ever fills: the last output token's KV is never written."""
    return prompt + max(output - 1, 0)


class ContiguousKVManager:
    """Per-sequence contiguous regions in an AddressSpace (first / best fit) or a BuddySpace (`buddy`:
    regions rounded up to a power of two) of num_blocks * block_size token slots (the same KV bytes as the
    paged pool).

    Units: regions are placed and sized in token slots (block_size 1 semantics inside); the KVManager
    interface still counts in blocks of `block_size` slots, so figures compare with the paged layout:
    `num_free_blocks` = free slots // block_size and `used_blocks` = num_blocks - num_free_blocks.

    Life of a request: `admit` learns the final length (prompt + actual output; the simulator knows it) and
    the number of sequences n (parallel samples or beams); `blocks_needed` reports whether n regions fit
    (their size in blocks) or not (more blocks than are free: the scheduler then waits, as FCFS engines
    block on the head of the queue); the first `allocate` places all n regions at once. Decode never
    allocates: `capacity_tokens` is the whole region and `grow_one_block` declines. `fork` hands a reserved
    region to a new sample, holding a copy of the prompt's KV; `reparent` overwrites a beam's region with
    another beam's KV (counted in `cow_copies`, in blocks of `block_size` slots). Nothing is shared,
    so `shared_dup_tokens` stays 0. Swapping is not modelled (`can_swap_out` is False: preemption, which
    reservations never need, would recompute).
    """

    __slots__ = ("block_size", "policy", "max_model_len", "space", "regions", "ntok", "spare", "pending",
                 "final", "reserved_slots", "never_filled_slots", "shared_dup_tokens", "cow_copies",
                 "_num_blocks")

    def __init__(self, num_blocks: int, block_size: int, policy: str, max_model_len: int,
                 placement: str = "first_fit") -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown contiguous policy {policy!r} (known: {', '.join(POLICIES)})")
        self._num_blocks = num_blocks
        self.block_size = block_size
        self.policy = policy
        self.max_model_len = max_model_len
        self.space = (BuddySpace(num_blocks * block_size) if placement == "buddy"
                      else AddressSpace(num_blocks * block_size, placement))
        self.regions: dict[int, tuple[int, int]] = {}      # seq -> (start, size)
        self.ntok: dict[int, int] = {}                     # seq -> tokens at the last allocate/fork
        self.spare: dict[int, list[tuple[int, int]]] = {}  # seq -> regions reserved for its forks
        self.pending: dict[int, tuple[int, int, int]] = {}  # seq -> (size, final slots, count) from admit
        self.final: dict[int, int] = {}                    # seq -> final slots of each of its regions
        self.reserved_slots = 0       # slots in placed regions (spares included)
        self.never_filled_slots = 0   # sum over placed regions of size - final slots
        self.shared_dup_tokens = 0
        self.cow_copies = 0

    # ----------------------------------------------------------------- sizes
    @property
    def num_blocks(self) -> int:
        return self._num_blocks

    @property
    def capacity_slots(self) -> int:
        return self.space.capacity

    @property
    def num_free_blocks(self) -> int:
        return self.space.free_slots // self.block_size

    @property
    def used_blocks(self) -> int:
        return self._num_blocks - self.space.free_slots // self.block_size

    @property
    def cached_blocks(self) -> int:
        """No prefix cache: nothing is kept for reuse."""
        return 0

    def _blocks(self, slots: int) -> int:
        return -(-slots // self.block_size)

    def request_reservation(self, req, output_tokens: int) -> tuple[int, int, int]:
        """(slots per sequence, final slots per sequence, sequences) for a request."""
        prompt = req.prompt_len
        count = max(req.n, req.beam_width)
        size = reservation_slots(self.policy, prompt, output_tokens, self.max_model_len)
        if self.space.placement == "buddy":  # a buddy block: the next power of two
            size = ceil_pow2(size)
        return size, final_slots(prompt, output_tokens), count

    def refuse_reason(self, req, output_tokens: int) -> str | None:
        """Why a request can never be admitted (its regions exceed the address space), or None."""
        size, _, count = self.request_reservation(req, output_tokens)
        if size * count > self.space.capacity:
            return (f"contiguous reservation of {count} x {size} slots exceeds the KV capacity of "
                    f"{self.space.capacity} slots")
        return None

    # ----------------------------------------------------------------- KVManager
    windows: tuple[int, ...] = ()
    """Window caps for ContextSums.windowed: none."""
    last_grow_delta: int = 1
    """grow_one_block never grows a region (it is reserved whole); the protocol's figure."""
    block_pages: int = 1
    tiers = None
    """KV tiers below the cache: none (tiers sit below a paged prefix cache)."""

    @property
    def evictions(self) -> int:
        """No prefix cache: nothing is evicted."""
        return 0

    def private_blocks(self, seq: int) -> int:
        """Blocks free(seq) gives back: its whole region (regions share nothing)."""
        return self.num_blocks_of(seq)

    def admit(self, seq: int, req, prompt_tokens: int, output_tokens: int) -> Hit:
        """Learn the request's final length; nothing is cached, so no tokens are served from cache."""
        self.pending[seq] = self.request_reservation(req, output_tokens)
        return NO_HIT

    def peek_hit(self, req, prompt_tokens: int) -> Hit:
        """Nothing is cached."""
        return NO_HIT

    def token_states(self, sums) -> int:
        """Slots holding real KV: every sequence's tokens (regions share nothing)."""
        return sums.tokens

    def has(self, seq: int) -> bool:
        return seq in self.regions

    def group_blocks_needed(self, seqs: list[int], num_tokens: int) -> int:
        """Regions are never shared, so a group needs the sum of its sequences' blocks."""
        return sum(self.blocks_needed(s, num_tokens) for s in seqs)

    def blocks_needed(self, seq: int, num_tokens: int) -> int:
        """0 within a placed region; for an admitted, unplaced sequence the blocks its regions take when
        they fit now, else one more block than is free."""
        region = self.regions.get(seq)
        if region is not None:
            if num_tokens > region[1]:
                raise RuntimeError(f"sequence {seq} outgrew its region ({num_tokens} > {region[1]} slots)")
            return 0
        size, _, count = self._pending(seq)
        if self.space.fits_all(size, count):
            return size * count // self.block_size
        return self.num_free_blocks + 1

    def _pending(self, seq: int) -> tuple[int, int, int]:
        try:
            return self.pending[seq]
        except KeyError:
            raise RuntimeError(f"sequence {seq}: admit() must come before its first allocation") from None

    def reserve(self, seq: int, num_tokens: int) -> bool:
        """allocate() of slots whose KV has not arrived (nothing is cached: the same)."""
        return self.allocate(seq, num_tokens)

    def allocate(self, seq: int, num_tokens: int) -> bool:
        """Place seq's regions (all n of them) on first use; later calls only record the token count."""
        region = self.regions.get(seq)
        if region is None:
            size, final, count = self._pending(seq)
            starts = []
            for _ in range(count):
                start = self.space.place(size)
                if start < 0:
                    for s in starts:
                        self.space.release(s, size)
                    return False
                starts.append(start)
            del self.pending[seq]
            self.regions[seq] = region = (starts[0], size)
            if count > 1:
                self.spare[seq] = [(s, size) for s in reversed(starts[1:])]
            self.final[seq] = final
            self.reserved_slots += size * count
            self.never_filled_slots += (size - final) * count
            self.ntok[seq] = 0
        if num_tokens > region[1]:
            return False
        if num_tokens > self.ntok[seq]:
            self.ntok[seq] = num_tokens
        return True

    def grow_each(self, seqs: list[int], num_tokens: list[int]) -> bool:
        """Regions never grow."""
        return False

    def grow_one_block(self, seq: int, num_tokens: int) -> bool:
        """Regions never grow."""
        return False

    def capacity_tokens(self, seq: int) -> int:
        return self.regions[seq][1]

    def last_block_shared(self, seq: int) -> bool:
        return False

    def num_blocks_of(self, seq: int) -> int:
        """Blocks of `block_size` slots the region spans (rounded up)."""
        return self._blocks(self.regions[seq][1])

    def fork(self, parent: int, child: int) -> None:
        """Give child one of the regions reserved with parent, holding a copy of parent's KV (the prompt's KV
        is written to every sample's region as the prefill ends; that copy is not charged)."""
        spares = self.spare.get(parent)
        if not spares:
            raise RuntimeError(f"sequence {parent} has no reserved region left for a fork")
        self.regions[child] = spares.pop()
        if not spares:
            del self.spare[parent]
        self.final[child] = self.final[parent]
        self.ntok[child] = self.ntok[parent]

    def reparent(self, seq: int, parent: int) -> None:
        """Beam search without sharing: seq's region gets a copy of parent's KV."""
        tokens = self.ntok[parent]
        self.ntok[seq] = tokens
        self.cow_copies += self._blocks(tokens)

    def set_computed_tokens(self, seq: int, num_tokens: int) -> None:
        """No prefix cache: nothing to register at free."""

    def free(self, seq: int) -> int:
        """Release seq's region (and any spare regions still reserved with it); return blocks freed."""
        self.pending.pop(seq, None)
        region = self.regions.pop(seq, None)
        if region is None:
            return 0
        final = self.final.pop(seq)
        del self.ntok[seq]
        freed = [region] + self.spare.pop(seq, [])
        for start, size in freed:
            self.space.release(start, size)
            self.reserved_slots -= size
            self.never_filled_slots -= size - final
        return sum(size for _, size in freed) // self.block_size

    def can_swap_out(self, seqs: list[int]) -> bool:
        return False

    def swap_out(self, seqs: list[int]) -> int:
        raise NotImplementedError("contiguous layouts do not swap")

    def swap_blocks_needed(self, seqs: list[int]) -> int:
        raise NotImplementedError("contiguous layouts do not swap")

    def swap_in(self, seqs: list[int]) -> int:
        raise NotImplementedError("contiguous layouts do not swap")

    # ----------------------------------------------------------------- accounting
    def breakdown(self, token_states: int, table_blocks: int = 0, head_req=None,
                  head_output: int = 0) -> tuple[int, int, int, int, int]:
        """(reservation, internal fragmentation, external fragmentation, free) in slots, which with
        token_states sum to the capacity, and the blocks held (nothing is shared here, so table_blocks is
        not needed). External: free slots in holes smaller than one region of the request at the head of
        the waiting queue (head_req), 0 when nothing waits."""
        internal = self.never_filled_slots
        reservation = self.reserved_slots - internal - token_states
        external = 0
        if head_req is not None:
            size = self.request_reservation(head_req, head_output)[0]
            external = self.space.free_in_holes_below(size)
        return reservation, internal, external, self.space.free_slots - external, self.used_blocks

    def check_invariants(self) -> int:
        """Raise AssertionError if regions, holes and the running sums disagree; return the regions read."""
        placed = list(self.regions.values()) + [r for rs in self.spare.values() for r in rs]
        self.space.check(placed)
        assert self.reserved_slots == sum(n for _, n in placed), "reserved slot count drifted"
        never = sum(size - self.final[s] for s, (_, size) in self.regions.items())
        never += sum(size - self.final[s] for s, rs in self.spare.items() for _, size in rs)
        assert never == self.never_filled_slots, "never-filled slot count drifted"
        for s, (_, size) in self.regions.items():
            assert self.ntok[s] <= size, f"seq {s} holds more tokens than its region"
        assert self.shared_dup_tokens == 0, "contiguous regions share nothing"
        return len(placed) + 1


def build_contiguous(kv_cfg, num_blocks: int, max_model_len: int) -> ContiguousKVManager:
    """The manager for `kv.layout: contiguous:<policy>`. What it cannot be combined with (prefix caching,
    sparsity) is a rule of the scenario schema (kvsim/scenario.py `cross_check`); a `contiguous:max` pool
    smaller than max_model_len is refused by the Simulation, which knows the pool size."""
    return ContiguousKVManager(num_blocks, kv_cfg.block_size, kv_cfg.layout.partition(":")[2], max_model_len,
                               kv_cfg.placement)
