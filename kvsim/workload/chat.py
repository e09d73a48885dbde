"""`kind: chat`: multi-turn sessions over a pool of shared system prompts.

A session picks system prompt i (0-based popularity rank) with probability proportional to 1/(i+1)^zipf_s
and runs a number of turns drawn from `turns`; after each turn it ends early with probability
`abandon_prob`, and it ends before the first turn whose prompt would exceed `max_context` tokens (a session
whose first turn does not fit is dropped). Turn k's prompt is the whole history as segments:

    (system prompt, its length), (user msg 0), (answer 0), ..., (user msg k-1), (answer k-1), (user msg k)

so turn k's prompt is turn k-1's prompt plus answer k-1 (of length output_len of turn k-1) plus user msg k.
Content ids: system prompt i is SYSTEM_PROMPT_ID_BASE + i; the user message of the j-th generated turn is
TURN_ID_BASE + 2j and its answer TURN_ID_BASE + 2j + 1, so every piece has its own id; a turn's
`output_id` is its answer's id, so the KV it generates matches the next turn's prompt.

Order and links. Open loop: sessions start at the arrival process's times; the list holds session after
session in start order, each session's turns consecutive; turn k > 0 has after = rid of turn k-1,
think_s drawn from `think_time_s`, and arrival_s = the session start (a placeholder). Closed loop: session
j is run by user j % users, each user's sessions back to back; the list holds user after user; a user's
first turn arrives at 0 with after = -1, every later turn is a follow-up of the user's previous turn, with
think_s from `think_time_s` inside a session and `arrival.think_time_s` between sessions.
`max_requests` keeps the first requests in session order (the last session may be cut short).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kvsim.errors import KvsimError
from kvsim.schema import MAX_REQUESTS
from kvsim.workload.config import ChatConfig, WorkloadConfig
from kvsim.workload.lengths import sample_lengths, sample_values
from kvsim.workload.links import check_requests, check_segments, session_starts
from kvsim.workload.request import Request, RequestTable, item_view

SYSTEM_PROMPT_ID_BASE = 1 << 40
TURN_ID_BASE = 2 << 40


def zipf_weights(count: int, s: float) -> np.ndarray:
    """Probabilities of ranks 1..count proportional to 1/rank^s (s = 0: uniform)."""
    w = 1.0 / np.arange(1, count + 1, dtype=np.float64) ** s
    return w / w.sum()


def chat_requests(cfg: WorkloadConfig, rng: np.random.Generator, max_requests: int | None,
                  duration_s: float | None, base_dir: str | Path | None = None) -> list[Request]:
    """The chat request stream (see the module docstring for content, order and follow-up links)."""
    return list(chat_table(cfg, rng, max_requests, duration_s, base_dir))


def chat_table(cfg: WorkloadConfig, rng: np.random.Generator, max_requests: int | None,
               duration_s: float | None, base_dir: str | Path | None = None) -> RequestTable:
    """The stream of `chat_requests` as columns (the same requests, built as they are read)."""
    chat = cfg.chat
    closed = cfg.arrival.process == "closed_loop"
    starts = session_starts(cfg.arrival, rng, max_requests, duration_s)
    n_sessions = len(starts)

    sys_len = sample_lengths(chat.system_prompt_len, rng, chat.system_prompts, base_dir)
    popularity = zipf_weights(chat.system_prompts, chat.zipf_s)
    sys_idx = rng.choice(chat.system_prompts, size=n_sessions, p=popularity)
    turns = sample_lengths(chat.turns, rng, n_sessions, base_dir)
    if chat.abandon_prob > 0:
        turns = np.minimum(turns, rng.geometric(chat.abandon_prob, size=n_sessions))
    if max_requests is not None and turns.sum() > MAX_REQUESTS:
        # too many to generate: a session gives at most max_requests turns to the stream anyway (cut only
        # here, so that every stream within the bound is drawn as before)
        turns = np.minimum(turns, max_requests)
    check_requests(int(turns.sum()), "workload.chat.turns", MAX_REQUESTS)
    session = np.repeat(np.arange(n_sessions), turns)
    n_turns = len(session)
    user_len = sample_lengths(chat.user_turn_len, rng, n_turns, base_dir)
    out_len = sample_lengths(cfg.output_len, rng, n_turns, base_dir)
    think = _think_times(chat, rng, n_turns, base_dir)

    first_of_session = np.cumsum(turns) - turns
    k = np.arange(n_turns) - first_of_session[session]
    pair = user_len + out_len
    history = np.cumsum(pair) - pair
    history -= history[first_of_session[session]]
    prompt = sys_len[sys_idx[session]] + history + user_len

    keep = prompt <= chat.max_context  # prompts grow within a session, so kept turns are a prefix
    if max_requests is not None:
        keep &= np.cumsum(keep) <= max_requests
    if not keep.any():
        raise KvsimError(f"workload.chat.max_context: no session's first turn fits in {chat.max_context} "
                         "tokens")
    session, k, user_len, out_len, think, prompt = (
        a[keep] for a in (session, k, user_len, out_len, think, prompt))
    check_segments(int((2 * k + 1).sum()), "workload.chat.turns")  # turn k lists 2k + 1 segments
    kept = np.unique(session)
    starts, sys_idx = starts[kept], sys_idx[kept]
    session = np.searchsorted(kept, session)  # surviving sessions renumbered 0.. in order
    turn_no = np.arange(len(k))

    if closed:
        user = session % cfg.arrival.users
        order = np.argsort(user, kind="stable")
        session, k, user_len, out_len, think, prompt, turn_no, user = (
            a[order] for a in (session, k, user_len, out_len, think, prompt, turn_no, user))
        head = np.ones(len(k), dtype=bool)
        head[1:] = user[1:] != user[:-1]
        think = np.where(k == 0, cfg.arrival.think_time_s, think)
        arrival = np.zeros(len(k))
    else:
        head = k == 0
        arrival = starts[session]
    rid = np.arange(len(k))
    after = np.where(head, -1, rid - 1)
    think = np.where(head, 0.0, think)
    return _build(cfg, sys_idx, sys_len, arrival, session, k, user_len, out_len, prompt, turn_no, after,
                  think)


def _think_times(chat: ChatConfig, rng: np.random.Generator, n: int,
                 base_dir: str | Path | None) -> np.ndarray:
    if isinstance(chat.think_time_s, (int, float)):
        return np.full(n, float(chat.think_time_s))
    return sample_values(chat.think_time_s, rng, n, base_dir)


def _build(cfg: WorkloadConfig, sys_idx: np.ndarray, sys_len: np.ndarray, arrival: np.ndarray,
           session: np.ndarray, k: np.ndarray, user_len: np.ndarray, out_len: np.ndarray,
           prompt: np.ndarray, turn_no: np.ndarray, after: np.ndarray, think: np.ndarray) -> RequestTable:
    return RequestTable(arrival, prompt, out_len, after=after, think_s=think, session=session,
                        output_id=TURN_ID_BASE + 2 * turn_no + 1, n=cfg.n, source="chat",
                        segments=_ChatSegments(sys_idx, sys_len, session, k, user_len, out_len, turn_no))


class _ChatSegments:
    """Row i's prompt segments: its session's system prompt, then (user message, answer) of each earlier
    turn (the k rows before it), then its own user message.

    A session's turns are read in order (each is released when the one before it completes), so row i's
    segments are kept until row i + 1 of the same session is read, which extends them by two (the answer
    to row i, its own user message) instead of listing the whole history again. (Compiled, an extension
    type, chat.pxd: k, turn_no, out_len and user_len, int64 columns, read through typed views.)"""

    __slots__ = ("sys_of_session", "sys_len", "session", "k", "user_len", "out_len", "turn_no", "_kept",
                 "_rows", "_ks", "_turns", "_outs", "_users")

    def __init__(self, sys_idx: np.ndarray, sys_len: np.ndarray, session: np.ndarray, k: np.ndarray,
                 user_len: np.ndarray, out_len: np.ndarray, turn_no: np.ndarray) -> None:
        self.sys_of_session = sys_idx
        self.sys_len = sys_len
        self.session = session
        self.k = k
        self.user_len = user_len
        self.out_len = out_len
        self.turn_no = turn_no
        self._kept: dict[int, tuple[tuple[int, int], ...]] = {}
        """Row -> its segments, while the next row (its session's next turn) has not been read."""
        self._rows = len(k)
        # (request.item_view: [i] is .item(i))
        self._ks = item_view(k)
        self._turns = item_view(turn_no)
        self._outs = item_view(out_len)
        self._users = item_view(user_len)

    def __reduce__(self):
        """Copies and pickles: the columns and the kept rows (the views are made again)."""
        return _chat_segments, (self.sys_of_session, self.sys_len, self.session, self.k, self.user_len,
                                self.out_len, self.turn_no, self._kept)

    def __call__(self, i: int) -> tuple[tuple[int, int], ...]:
        return self.row(i)

    def row(self, i: int) -> tuple[tuple[int, int], ...]:
        """Row i's segments (what a call gives)."""
        ks = self._ks
        turn_no = self._turns
        base = TURN_ID_BASE
        k = ks[i]
        before = self._kept.pop(i - 1, None) if k else None
        if before is None:
            segments = self._list(i, k)
        else:  # the turn before's segments, its answer, this turn's user message
            segments = before + ((base + 2 * turn_no[i - 1] + 1, self._outs[i - 1]),
                                 (base + 2 * turn_no[i], self._users[i]))
        if i + 1 < self._rows and ks[i + 1]:  # (the next row is this session's next turn)
            self._kept[i] = segments
        return segments

    def _list(self, i: int, k: int) -> tuple[tuple[int, int], ...]:
        """Row i's segments from its columns (k: its turn in the session)."""
        first = i - k  # a session's turns are consecutive rows, turn 0 first
        sys = self.sys_of_session.item(self.session.item(i))
        pieces = [(SYSTEM_PROMPT_ID_BASE + sys, self.sys_len.item(sys))]
        if k:  # (a session's first turn: no history)
            for j, u, o in zip(self.turn_no[first:i].tolist(), self.user_len[first:i].tolist(),
                               self.out_len[first:i].tolist(), strict=True):
                pieces.append((TURN_ID_BASE + 2 * j, u))
                pieces.append((TURN_ID_BASE + 2 * j + 1, o))
        pieces.append((TURN_ID_BASE + 2 * self.turn_no.item(i), self.user_len.item(i)))
        return tuple(pieces)


def _chat_segments(sys_idx: np.ndarray, sys_len: np.ndarray, session: np.ndarray, k: np.ndarray,
                   user_len: np.ndarray, out_len: np.ndarray, turn_no: np.ndarray,
                   kept: dict[int, tuple[tuple[int, int], ...]]) -> _ChatSegments:
    """A _ChatSegments with these columns and kept rows (its __reduce__)."""
    segs = _ChatSegments(sys_idx, sys_len, session, k, user_len, out_len, turn_no)
    segs._kept = kept
    return segs
