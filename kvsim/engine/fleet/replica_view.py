"""What a router may see of one replica: its place in the fleet, its queues and a read-only KVView."""

from __future__ import annotations

from kvsim.kvcache.view import KVView


class ReplicaView:
    """Read-only state of one replica for a router (kvsim/engine/fleet/router.py): `index` in the fleet, its
    `pool` name and `role` (mixed, prefill, decode), its queue lengths (requests, not sequences) and `kv`,
    a KVView of its caches. Nothing here changes the replica."""

    __slots__ = ("index", "pool", "role", "kv", "_sched")

    def __init__(self, index: int, pool: str, role: str, sched) -> None:
        self.index = index
        self.pool = pool
        self.role = role
        self.kv = KVView(sched.kv)
        self._sched = sched

    @property
    def waiting(self) -> int:
        """Requests queued for admission (including those arriving for decode, P/D)."""
        return len(self._sched.waiting)

    @property
    def running(self) -> int:
        """Requests admitted (prefilling or decoding), swapped-out ones included."""
        return len(self._sched.running) + len(self._sched.swapped)

    @property
    def load(self) -> int:
        """waiting + running: the queue-length load routers compare."""
        s = self._sched
        return len(s.waiting) + len(s.running) + len(s.swapped)

    def lora_adapter(self, adapter: int) -> int:
        """Where the replica holds LoRA adapter `adapter` (multi-LoRA, docs/lora.md): 0 in a GPU slot, 1 in
        host memory only, 2 neither (read from disk on admission) or no lora section; a lookup, no LRU
        touch."""
        lora = self._sched.lora
        return 2 if lora is None else lora.where(adapter)

    def lora_admissible(self, adapter: int) -> bool:
        """Whether a request of LoRA adapter `adapter` could join the replica's running requests now:
        False only when they already hold max_loras distinct adapters, none of them `adapter` (vLLM would
        skip it there until one finishes); True without a lora section. A lookup, nothing changes."""
        lora = self._sched.lora
        return True if lora is None else lora.admissible(adapter)

    @property
    def kv_usage(self) -> float:
        """Share of the KV pool referenced by sequences (KVView.usage)."""
        return self.kv.usage
