"""One replica's adapters: which are in its GPU slots and its host-memory cache, which the running
requests use (the distinct-adapter limit), what loading a missing one costs, and the counts the outputs
report.

vLLM (vllm/lora/worker_manager.py `LRUCacheWorkerLoRAManager`, vllm/lora/models.py
`LRUCacheLoRAModelManager`): before each forward pass the model runner activates the batch's adapters
(`set_active_adapters`, synchronously: the iteration waits). An adapter not in host memory is read from
disk first (`_load_adapter`) into the host LRU cache of max_cpu_loras adapters (the least recently used
one is removed when it is full, and leaves its GPU slot with it); one not in a GPU slot is copied into
one (`activate_adapter`), the least recently used adapter leaving when all max_loras slots are full. The
v1 scheduler admits at most max_loras distinct adapters among the requests it schedules (a waiting
request whose adapter would be one too many is skipped, later ones may go), so an adapter in the batch
never leaves: the slot taken is always one no running request uses.
"""

from __future__ import annotations

from collections import OrderedDict

GPU, HOST, DISK = 0, 1, 2
"""Where an admission found its adapter (the request column `lora_found`)."""


class RequestLora:
    """One request's LoRA figures on the replica that ran it."""

    __slots__ = ("found", "loads", "load_bytes", "load_s", "skips")

    def __init__(self) -> None:
        self.found = -1
        """Where its first admission found its adapter: GPU, HOST or DISK."""
        self.loads = 0
        self.load_bytes = 0.0
        self.load_s = 0.0
        self.skips = 0

    def values(self, adapter: int) -> tuple:
        return (adapter, self.found, self.loads, self.load_bytes, self.load_s, self.skips)


class AdapterSlots:
    """The GPU slots (LRU, max_loras) and host cache (LRU, max_cpu_loras) of one replica; `active` counts
    the running requests of each adapter. `gpu_bytes[a]` / `disk_bytes[a]`: what loading adapter a moves
    per GPU over the host link, and reads from disk; `host_bw` / `disk_bw` in bytes/s."""

    __slots__ = ("max_loras", "max_cpu", "gpu", "host", "active", "gpu_bytes", "disk_bytes", "host_bw",
                 "disk_bw", "stats", "gpu_hits", "host_hits", "disk_loads", "load_bytes", "disk_read_bytes",
                 "load_s", "skips", "loads", "seqs", "pending_s", "last")

    def __init__(self, max_loras: int, max_cpu: int, gpu_bytes, disk_bytes, host_bw: float,
                 disk_bw: float) -> None:
        self.max_loras = max_loras
        self.max_cpu = max_cpu
        self.gpu: OrderedDict[int, None] = OrderedDict()
        self.host: OrderedDict[int, None] = OrderedDict()
        self.active: dict[int, int] = {}
        self.gpu_bytes = gpu_bytes
        self.disk_bytes = disk_bytes
        self.host_bw = host_bw
        self.disk_bw = disk_bw
        self.stats: dict[int, RequestLora] = {}
        self.gpu_hits = self.host_hits = self.disk_loads = self.loads = self.skips = 0
        """Admissions (of adapter requests) that found the adapter in a GPU slot, in host memory only,
        nowhere (read from disk); loads into a GPU slot; waiting requests skipped for the limit."""
        self.load_bytes = self.disk_read_bytes = self.load_s = 0.0
        self.seqs = 0
        """Sequences of the running requests that have an adapter."""
        self.pending_s = 0.0
        """Seconds of adapter loads the next iteration waits for (Batch.lora_load_s)."""
        self.last: tuple = (0, 0, 0.0)
        """The last batch's (lora_tokens, lora_adapters, lora_load_s): its timeline columns."""

    def _stat(self, rid: int) -> RequestLora:
        s = self.stats.get(rid)
        if s is None:
            s = self.stats[rid] = RequestLora()
        return s

    def where(self, adapter: int) -> int:
        """GPU, HOST or DISK: where `adapter` is now (read only, for routers)."""
        if adapter in self.gpu:
            return GPU
        return HOST if adapter in self.host else DISK

    def admissible(self, adapter: int) -> bool:
        """Whether a request of `adapter` may join the running ones (vLLM's max_loras rule)."""
        return adapter < 0 or adapter in self.active or len(self.active) < self.max_loras

    def skip(self, rid: int) -> None:
        """A waiting request was passed over for the distinct-adapter limit (once per scheduling pass)."""
        self.skips += 1
        self._stat(rid).skips += 1

    def activate(self, adapter: int, rid: int, first: bool, seqs: int = 1) -> float:
        """A request of `adapter` (`seqs` sequences) joins the running ones (an admission, a swap-in):
        the seconds its adapter's load adds to this iteration (0 when it is in a GPU slot), also added to
        pending_s. `first`: its first admission (the one the hit rates count)."""
        self.seqs += seqs
        active = self.active
        active[adapter] = active.get(adapter, 0) + 1
        stat = self._stat(rid)
        gpu, host = self.gpu, self.host
        if adapter in gpu:
            gpu.move_to_end(adapter)
            host.move_to_end(adapter)
            found = GPU
            seconds = 0.0
        else:
            seconds = 0.0
            if adapter in host:
                host.move_to_end(adapter)
                found = HOST
            else:
                found = DISK
                read = self.disk_bytes[adapter]
                seconds += read / self.disk_bw
                self.disk_read_bytes += read
                if len(host) >= self.max_cpu:
                    victim = self._victim(host)
                    del host[victim]
                    gpu.pop(victim, None)  # (vLLM's remove_adapter deactivates it too)
                host[adapter] = None
            if len(gpu) >= self.max_loras:
                del gpu[self._victim(gpu)]
            gpu[adapter] = None
            moved = self.gpu_bytes[adapter]
            seconds += moved / self.host_bw
            self.loads += 1
            self.load_bytes += moved
            self.load_s += seconds
            stat.loads += 1
            stat.load_bytes += moved
            stat.load_s += seconds
            self.pending_s += seconds
        if first:
            stat.found = found
            if found == GPU:
                self.gpu_hits += 1
            elif found == HOST:
                self.host_hits += 1
            else:
                self.disk_loads += 1
        return seconds

    def _victim(self, lru: OrderedDict[int, None]) -> int:
        """The least recently used adapter of `lru` that no running request uses (there is one: the
        running requests use at most max_loras <= max_cpu_loras adapters, and the one being added is not
        among them)."""
        active = self.active
        for a in lru:
            if a not in active:
                return a
        raise AssertionError("every cached adapter is in use")  # (the max_loras rule prevents it)

    def release(self, adapter: int, seqs: int = 1) -> None:
        """A request of `adapter` (`seqs` sequences) left the running ones (finished, preempted, swapped
        out)."""
        self.seqs -= seqs
        n = self.active[adapter] - 1
        if n:
            self.active[adapter] = n
        else:
            del self.active[adapter]

    def batch(self, batch, sched):
        """`batch` (the Batch the scheduler `sched` just built) with its LoRA fields: the adapter tokens of
        its prefill chunks and decoding sequences (none in a prefill-only iteration), the distinct adapters
        running, and the loads this iteration waits for (pending_s, then reset)."""
        tokens = 0
        prefill_seqs = 0
        for g in sched.prefilling:
            if g.req.adapter >= 0:
                prefill_seqs += g.n
                tokens += g.chunk
        if not sched._paused:
            tokens += self.seqs - prefill_seqs
        load, self.pending_s = self.pending_s, 0.0
        self.last = (tokens, len(self.active), load)
        return type(batch)(**{**batch._asdict(), "lora_tokens": tokens, "lora_adapters": len(self.active),
                              "lora_load_s": load})

    def request_values(self, rid: int, adapter: int) -> tuple:
        """The request columns of rid (kvsim/engine/lora_columns.py), and forget it."""
        stat = self.stats.pop(rid, None)
        if stat is None:
            return (adapter, -1, 0, 0.0, 0.0, 0)
        return stat.values(adapter)

    def totals(self) -> dict:
        """This replica's counts (meta `lora.replicas`)."""
        return {"gpu_hits": self.gpu_hits, "host_hits": self.host_hits, "disk_loads": self.disk_loads,
                "loads": self.loads, "load_bytes": self.load_bytes, "disk_read_bytes": self.disk_read_bytes,
                "load_stall_s": self.load_s, "skips": self.skips}
