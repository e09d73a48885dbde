"""Timed links that KV moves over (PCIe host link, NVMe, network to a remote store).

A `Link` is one direction of one path with a bandwidth (bytes/s) and a latency (s). Transfers on a link
are served first come, first served, one at a time at the full bandwidth (as a DMA engine or an NVMe
queue drains its requests): a transfer of B bytes asked for at t starts at max(t, the link's busy-until)
and ends latency + B / bandwidth later. Under sustained load this gives every transfer the same share of
the bandwidth over time as fair sharing would, and it is what makes a later load wait behind earlier ones.
"""

from __future__ import annotations


class Link:
    """One direction of a transfer path: FCFS, full bandwidth per transfer (module docstring)."""

    __slots__ = ("name", "bandwidth", "latency", "busy_until", "bytes", "busy_s", "transfers")

    def __init__(self, name: str, bandwidth: float, latency: float = 0.0) -> None:
        if not bandwidth > 0:
            raise ValueError(f"link {name}: bandwidth must be > 0")
        self.name = name
        self.bandwidth = bandwidth
        self.latency = latency
        self.busy_until = 0.0
        self.bytes = 0.0       # bytes moved so far
        self.busy_s = 0.0      # seconds the link was transferring (for utilisation)
        self.transfers = 0

    def transfer(self, now: float, nbytes: float) -> float:
        """Queue a transfer of nbytes asked for at `now`; returns when it has arrived."""
        if nbytes <= 0:
            return now
        start = now if now > self.busy_until else self.busy_until
        duration = self.latency + nbytes / self.bandwidth
        self.busy_until = start + duration
        self.bytes += nbytes
        self.busy_s += duration
        self.transfers += 1
        return self.busy_until


def transfer_on(links: tuple[Link, ...], now: float, nbytes: float,
                earliest: float | None = None) -> tuple[float, float]:
    """One transfer that occupies every link of a path at once (a sender's NIC and a receiver's, say): it
    starts when all are free (and not before `earliest`, default now) and runs at the slowest link's
    bandwidth, plus the largest latency. Returns (start, arrival); each link is busy until the arrival."""
    start = now if earliest is None else earliest
    for link in links:
        if link.busy_until > start:
            start = link.busy_until
    bw = min(link.bandwidth for link in links)
    duration = max(link.latency for link in links) + nbytes / bw
    end = start + duration
    for link in links:
        link.busy_until = end
        link.bytes += nbytes
        link.busy_s += duration
        link.transfers += 1
    return start, end


class TierLinks:
    """The links a tier chain's loads go over, one set per replica: the host link (H2D) for every tier,
    behind it the SSD's read path or the network to the remote store. A load from several tiers starts
    every path at once; it has arrived when the slowest has (the stages of one path stream, so a path
    costs its slowest link, not their sum)."""

    __slots__ = ("h2d", "paths", "bytes_per_token", "shards")

    def __init__(self, host_bandwidth: float, tiers: list[tuple[str, float, float]],
                 bytes_per_token: float, shards: int = 1) -> None:
        """tiers: (medium, bandwidth, latency) of each tier's own link; a cpu tier's is the host link
        itself (its bandwidth and latency, where the tier sets them, are the host link's for every tier).
        bytes_per_token: one GPU's KV per token; shards: the GPUs of the replica (tensor parallel), each
        loading its shard over its own host link, all of them over a tier's own link."""
        cpu = [(bw, lat) for medium, bw, lat in tiers if medium == "cpu"]
        self.h2d = Link("h2d", *cpu[0]) if cpu else Link("h2d", host_bandwidth)
        self.paths: dict[str, tuple[Link, ...]] = {}
        for medium, bandwidth, latency in tiers:
            if medium == "cpu":
                self.paths[medium] = (self.h2d,)
            else:
                self.paths[medium] = (Link(medium, bandwidth, latency), self.h2d)
        self.bytes_per_token = bytes_per_token
        self.shards = shards

    def load(self, now: float, by_tier: tuple[tuple[str, int], ...]) -> float:
        """Queue the loads of a hit (tokens per tier; 'gpu' needs none); returns when all have arrived."""
        ready = now
        for medium, tokens in by_tier:
            path = self.paths.get(medium)
            if path is None:
                continue
            nbytes = tokens * self.bytes_per_token
            for link in path:
                done = link.transfer(now, nbytes if link is self.h2d else nbytes * self.shards)
                if done > ready:
                    ready = done
        return ready

    def links(self) -> list[Link]:
        """Every link, the host link first."""
        out = [self.h2d]
        for path in self.paths.values():
            out.extend(link for link in path if link is not self.h2d)
        return out
