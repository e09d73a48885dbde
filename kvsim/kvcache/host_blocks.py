"""Host-memory copies of swapped-out blocks, shared by the paged manager and the coordinator's token tables.

A swap-out gives each GPU block of a group one fresh host id (blocks shared inside the group stay shared);
a host block is refcounted by the swapped tables holding it and released when the last comes back. A
swap-in gives each host block one fresh GPU block, again shared inside the group."""

from __future__ import annotations


class HostBlocks:
    """Refcounted host copies (see the module docstring). `len()` is the host blocks held."""

    __slots__ = ("refcount", "_next")

    def __init__(self) -> None:
        self.refcount: dict[int, int] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self.refcount)

    def store(self, table: list[int], remap: dict[int, int]) -> list[int]:
        """The host table of a GPU table; remap (GPU id -> host id) is shared by one group's sequences,
        so len(remap) afterwards is the blocks the group moved."""
        refcount = self.refcount
        host = []
        for b in table:
            h = remap.get(b)
            if h is None:
                h = remap[b] = self._next
                self._next += 1
                refcount[h] = 0
            refcount[h] += 1
            host.append(h)
        return host

    def load(self, host: list[int], remap: dict[int, int], pool) -> tuple[list[int], int]:
        """The GPU table of a host table, on blocks of `pool` (remap: host id -> GPU id, shared by one
        group's sequences); returns (table, host blocks released)."""
        refcount = self.refcount
        table = []
        released = 0
        for h in host:
            b = remap.get(h)
            if b is None:
                b = remap[h] = pool.allocate()
            else:
                pool.incref(b)
            table.append(b)
            refcount[h] -= 1
            if not refcount[h]:
                del refcount[h]
                released += 1
        return table, released
