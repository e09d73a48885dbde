"""The prefill -> decode hand-off (P/D): what a replica's scheduler asks of it (`HandOff`, the one hooks
object the scheduler calls: vLLM's KV connector idea) and the timed transfer of the KV between the two
replicas over their NICs (`KVTransfer`, the cluster's side).

On a prefill replica a finished prefill leaves the batch with its KV held (`HandOff.hold`) until the
transfer is done (`HandOff.release`). A decode replica admits the request once it has blocks for the
whole prompt and asks `HandOff.receive(now, group, tokens)` when that KV arrives: after_prefill, the decode
replica pulls it then (vLLM's NixlConnector); layerwise, it streamed layer by layer during the last prefill
iteration (Mooncake, DistServe) and waits in the receive buffer. The decode replica computes the last
prompt token for the first output token once the KV has arrived, so TTFT = prefill + transfer + one
decode-replica step, as vLLM's disaggregated serving reports it. The prefill replica frees the KV when it
has arrived.
"""

from __future__ import annotations

from collections.abc import Callable

from kvsim.engine.group import PREFILL, WAITING, Group
from kvsim.kvcache.links import Link, transfer_on


class HandOff:
    """A replica's P/D hooks. `sends`: a prefill replica (a finished prefill leaves with its KV held);
    `receive(now, group, tokens) -> arrival time` of the KV of `tokens` prompt tokens that a group brings
    from a prefill replica (Group.remote_tokens), called when a decode replica admits it with blocks
    reserved for them (None elsewhere). `held`: sequence -> (tokens, blocks) kept for a transfer."""

    __slots__ = ("sends", "receive", "held", "tokens", "blocks")

    def __init__(self, sends: bool = False,
                 receive: Callable[[float, Group, int], float] | None = None) -> None:
        self.sends = sends
        self.receive = receive
        self.held: dict[int, tuple[int, int]] = {}
        self.tokens = 0
        """KV tokens held for transfers (the scheduler's token sums count them)."""
        self.blocks = 0

    @property
    def active(self) -> bool:
        """Whether the scheduler calls out to the cluster (a replica with P/D hooks steps one by one)."""
        return self.sends or self.receive is not None

    def hold(self, seq: int, tokens: int, blocks: int) -> None:
        self.held[seq] = (tokens, blocks)
        self.tokens += tokens
        self.blocks += blocks

    def release(self, seq: int) -> None:
        """The KV held for seq's transfer has gone (the scheduler frees its blocks)."""
        tokens, blocks = self.held.pop(seq)
        self.tokens -= tokens
        self.blocks -= blocks


class KVTransfer:
    """The cluster's side of P/D: one NIC link per replica (the per-GPU bandwidth x its GPUs), the hand-off
    of a finished prefill to a decode replica, and each transfer's timing (module docstring).

    `replicas` are the fleet's Replicas, `deployments` each one's Deployment; `transfer` is
    `cluster.kv_transfer`; `env` the simulation clock."""

    def __init__(self, env, replicas: list, deployments: list, transfer) -> None:
        self.env = env
        self.replicas = replicas
        self.deployment_of = deployments
        self.transfer = transfer
        self.layerwise = transfer.mode == "layerwise"
        self.nic: dict[int, Link] = {}
        for i, d in enumerate(deployments):
            self.nic[i] = Link(f"{transfer.link}:{i}", d.nic_bandwidth(transfer), transfer.latency_s)

    def receiver(self, d: int) -> Callable[[float, Group, int], float]:
        """Decode replica d's `HandOff.receive`."""
        return _arrived if self.layerwise else lambda now, grp, tokens: self._pull(now, grp, tokens, d)

    def _kv_bytes(self, p: int, tokens: int) -> float:
        d = self.deployment_of[p]
        return tokens * d.capacity.kv_bytes_per_token * d.tp

    def hand_off(self, g: Group, d: int, hit_tokens: Callable[[], int]) -> None:
        """g finished its prefill on replica g.replica; it goes to decode replica d (`hit_tokens()`: what
        d's cache holds of its prompt now, for a layerwise stream)."""
        p = g.replica
        g.output = min(g.req.output_len, self.deployment_of[d].max_model_len - g.req.prompt_len)
        g.prefill_replica = p
        g.remote_tokens = g.prompt
        g.state = WAITING
        g.phase = PREFILL
        g.computed = 0
        g.chunk = 0
        g.generated = 0
        g.epoch += 1
        g.ready_s = 0.0
        if self.layerwise:
            self._stream(g, p, d, hit_tokens())
        self.replicas[d].submit(g)

    def _stream(self, g: Group, p: int, d: int, hit: int) -> None:
        """layerwise: the KV of all but the last prompt token, less what the decode replica's cache holds
        now, streams from the start of the prefill's last iteration; the last layer's share leaves when
        that iteration ends."""
        tokens = max(0, g.prompt - 1 - hit)
        nbytes = self._kv_bytes(p, tokens)
        if nbytes == 0:
            self._arrive(g, p, 0.0, g.prefill_done_s, g.prefill_done_s)
            return
        links = (self.nic[p], self.nic[d])
        done = g.prefill_done_s
        _, end = transfer_on(links, done, nbytes, earliest=g.last_chunk_s)
        layers = max(1, self.deployment_of[p].model.num_layers)
        tail = done + max(x.latency for x in links) + nbytes / layers / min(x.bandwidth for x in links)
        if tail > end:
            for x in links:
                x.busy_until = max(x.busy_until, tail)
            end = tail
        self._arrive(g, p, nbytes, done, end)

    def _pull(self, now: float, g: Group, tokens: int, d: int) -> float:
        """after_prefill: decode replica d, having reserved blocks, pulls `tokens` tokens' KV."""
        p = g.prefill_replica
        nbytes = self._kv_bytes(p, tokens)
        if nbytes == 0:  # the decode replica's own cache had it all
            self._arrive(g, p, 0.0, now, now)
            return now
        _, end = transfer_on((self.nic[p], self.nic[d]), now, nbytes)
        self._arrive(g, p, nbytes, now, end)
        return end

    def _arrive(self, g: Group, p: int, nbytes: float, asked: float, end: float) -> None:
        g.kv_transfer_bytes = nbytes
        g.kv_arrival_s = end
        g.kv_transfer_s = end - max(asked, g.prefill_done_s)
        seq = g.seqs[0]
        env = self.env
        if end > env.now:
            env.timeout(end - env.now).callbacks.append(lambda _e: self._release(p, seq))
        else:
            self._release(p, seq)

    def _release(self, p: int, seq: int) -> None:
        rep = self.replicas[p]
        rep.sched.release(seq)
        rep.wake()

    def describe(self) -> dict:
        """meta['fleet']['kv_transfer']: the link's settings and totals."""
        t = self.transfer
        nics = list(self.nic.values())
        return {
            "mode": t.mode, "link": t.link, "latency_s": t.latency_s,
            "bandwidth_bytes_per_s": {str(i): x.bandwidth for i, x in self.nic.items()},
            # every transfer occupies two NICs: count it once
            "transfers": sum(x.transfers for x in nics) // 2,
            "bytes": sum(x.bytes for x in nics) / 2,
            "busy_s": sum(x.busy_s for x in nics) / 2,
        }


def _arrived(now: float, g: Group, tokens: int) -> float:
    """layerwise: the KV was streamed at hand-off; it is there at kv_arrival_s."""
    return g.kv_arrival_s if g.kv_arrival_s > now else now
