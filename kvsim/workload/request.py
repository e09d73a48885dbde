"""The request record every workload generator and trace reader produces."""

from __future__ import annotations

from dataclasses import dataclass

Segment = tuple[int, int]
"""(content_id, length in tokens). Equal content ids mean equal token content, so two prompts that start
with the same segments share a prefix. A prompt is a tuple of segments whose lengths sum to prompt_len."""


@dataclass(slots=True)
class Request:
    """One inference request as the engine sees it.

    arrival_s is the open-loop arrival time. A request with ``after >= 0`` is a follow-up (the next turn of a
    session, the next request of a closed-loop user): it is released ``think_s`` seconds after request
    ``after`` completes, and its arrival_s is set then. ``segments`` describes prompt content for prefix
    caching; an empty tuple means content unique to this request. ``output_id`` is the content id of the
    tokens the request generates, for workloads whose later prompts quote them (a chat answer, an agent's
    tool call); -1 means content unique to this request. ``beam_width`` > 1 asks for beam search with that
    many beams (the engine then runs beam_width sequences; ``n`` stays 1). ``rereads`` lists content ids
    of prompt segments the request re-reads while decoding (an agent consulting an old tool output);
    token-level sparsity policies move attention back onto them (kvsim/workload/rereads.py marks them).
    """

    rid: int
    arrival_s: float
    prompt_len: int
    output_len: int
    n: int = 1
    segments: tuple[Segment, ...] = ()
    session: int = -1
    after: int = -1
    think_s: float = 0.0
    source: str = ""
    output_id: int = -1
    beam_width: int = 1
    rereads: tuple[int, ...] = ()
