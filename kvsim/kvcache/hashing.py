"""Block content of a sequence, from its request's segments, without token arrays.

A sequence's content is its request's prompt segments followed by its generated tokens:

    segments (or one segment unique to the request when it has none) + (output content id, unbounded)

Token t of segment (cid, length) is "token t of content cid", so two segments with the same id share their
first min(length) tokens. A full block of `block_size` tokens is described by its *page key*: the pieces of
segments that overlap it, in order; `(cid, offset)` when the block lies inside one segment, else a tuple
of `(cid, offset, length)` triples. Page keys are canonical: equal token content gives equal keys.

The prefix-cache key of block i chains: key_i = hash((key_{i-1}, page key_i)), key_{-1} = hash of the
namespace. So equal keys mean equal content for the block *and every block before it* (vLLM's automatic
prefix caching). Only full blocks get keys: a partial last block is never shared through the cache.

Content id ranges owned here (see docs/workloads.md for the generators' ranges):
UNIQUE_ID_BASE + rid for the prompt of a request without segments, OUTPUT_ID_BASE + rid for the tokens a
request generates when it does not name them (`Request.output_id`).
"""

from __future__ import annotations

import hashlib
import sys
from collections import OrderedDict
from functools import lru_cache
from itertools import repeat

from kvsim.workload.request import Request

UNIQUE_ID_BASE = 9 << 40
OUTPUT_ID_BASE = 10 << 40
PAD_ID_BASE = 11 << 40
UNBOUNDED = 1 << 62
"""Length of the output segment: generated tokens continue until the request stops."""


@lru_cache(maxsize=1024)
def namespace_key(namespace: str | int = "") -> int:
    """The chain's root: blocks under different namespaces never share keys (e.g. tenants, adapters).
    Stable across processes (str hashes are salted per process, so names go through blake2b)."""
    if isinstance(namespace, str):
        namespace = int.from_bytes(hashlib.blake2b(namespace.encode(), digest_size=8).digest(), "little")
    return hash((0x6B7673696D, namespace))


def request_content(req: Request) -> tuple[tuple[int, int], ...]:
    """The (content id, length) segments of a request's sequence: prompt, then its generated tokens."""
    segs = req.segments
    if not segs:
        segs = ((UNIQUE_ID_BASE + req.rid, req.prompt_len),)
    else:
        short = req.prompt_len
        for seg in segs:
            short -= seg[1]
        if short > 0:
            segs = (*segs, (PAD_ID_BASE + req.rid, short))
    out_id = req.output_id if req.output_id >= 0 else OUTPUT_ID_BASE + req.rid
    return (*segs, (out_id, UNBOUNDED))


def cross_page(segs: list, i: int, off: int, bs: int) -> tuple[tuple | None, int, int]:
    """The page of bs tokens starting at offset off of segment i that crosses into the segments after it:
    (its page key, the (cid, offset, length) pieces in order; None when the content ends inside it, a page
    that is not full), and the segment index and offset just past it."""
    parts = []
    need = bs
    nseg = len(segs)
    while need and i < nseg:
        cid, length = segs[i]
        take = min(length - off, need)
        parts.append((cid, off, take))
        need -= take
        off += take
        if off == length:
            i, off = i + 1, 0
    return (None if need else tuple(parts)), i, off


class BlockContent:
    """Page keys (chained=False) or chained prefix-cache keys (chained=True) of a sequence's full blocks,
    computed lazily: `upto(n)` returns a list holding at least the first n (fewer only if the content
    ends first). The list grows in place on later calls; callers must not modify it.

    `resume` starts a content from the keys of an earlier one that its segments extend (a conversation's
    next turn), and `hint` then holds the blocks a table of the earlier one held for them: a guess a cache
    checks before it looks a key up (None: no guess)."""

    __slots__ = ("bs", "segs", "out", "chained", "_i", "_off", "_last", "hint")

    def __init__(self, segments: tuple[tuple[int, int], ...], block_size: int, chained: bool = True,
                 namespace: str | int = "") -> None:
        self.bs = block_size
        self.segs = [s for s in segments if s[1] > 0]
        self.out: list = []
        self.chained = chained
        self._i = 0
        self._off = 0
        self._last = namespace_key(namespace)
        self.hint: list[int] | None = None

    def resume(self, prev: BlockContent, table: list[int] | None, take: bool = False) -> None:
        """Take prev's keys of the leading full blocks the two contents share (their segments up to where
        they differ; prev of the same block size, chaining and namespace), the values upto would compute;
        `hint` = table. Only on a content with no keys yet. take: prev is no longer used and nothing else
        holds its key list (ContentMemo.get's, compiled): that list is cut to the shared keys and taken,
        instead of a copy."""
        if self.out or prev.bs != self.bs or prev.chained != self.chained:
            return
        pos = 0
        a = prev.segs
        b = self.segs
        for j in range(min(len(a), len(b))):  # (the segments both start with: an index loop, C when compiled)
            s1 = a[j]
            s2 = b[j]
            if s1 is s2:  # (a follow-up's segments are often its turn's own: no compare)
                l1 = s1[1]
                pos += l1
                continue
            c1, l1 = s1
            c2, l2 = s2
            if c1 != c2:
                break
            if l1 != l2:
                pos += min(l1, l2)
                break
            pos += l1
        m = min(pos // self.bs, len(prev.out))
        if m <= 0:
            return
        if take:
            out = prev.out
            del out[m:]
            self.out = out
        else:
            self.out = prev.out[:m]
        self.hint = table
        segs = self.segs
        i = 0
        t = m * self.bs
        while i < len(segs):  # (the segment lengths read once each, C integers when compiled)
            sl = segs[i][1]
            if t < sl:
                break
            t -= sl
            i += 1
        self._i, self._off = i, t
        if self.chained:
            self._last = self.out[-1]

    def upto(self, n: int) -> list:
        out = self.out
        if len(out) >= n:
            return out
        if self.chained and _C_HASH:  # (compiled: the same keys, without the tuples)
            _hash_upto(self, n)
            return out
        bs = self.bs
        segs = self.segs
        nseg = len(segs)
        chained = self.chained
        i, off, last = self._i, self._off, self._last
        while len(out) < n and i < nseg:
            cid, length = segs[i]
            if length - off >= bs:
                # whole blocks inside segment i
                stop = off + (min(n - len(out), (length - off) // bs)) * bs
                if chained:
                    for o in range(off, stop, bs):
                        last = hash((last, (cid, o)))
                        out.append(last)
                else:
                    out.extend(zip(repeat(cid), range(off, stop, bs)))
                off = stop
                if off == length:
                    i, off = i + 1, 0
                continue
            page, i, off = cross_page(segs, i, off, bs)
            if page is None:
                break  # content ended inside this block: it is not full
            if chained:
                last = hash((last, page))
                out.append(last)
            else:
                out.append(page)
        self._i, self._off, self._last = i, off, last
        return out


_M64 = (1 << 64) - 1
_X1 = 11400714785074694791
_X2 = 14029467366897019727
_X5 = 2870177450012600261
_MODULUS = (1 << 61) - 1
"""hash(o) of an int 0 <= o < 2**62 is o % _MODULUS (sys.hash_info.modulus on 64-bit builds)."""


def pair_hash(a: int, b: int) -> int:
    """hash((x, y)) from a = hash(x) and b = hash(y): CPython's tuple hash (xxHash's rounds over the
    items' hashes, 64-bit), which upto's compiled loop uses instead of building the tuples (hashing.pxd:
    unsigned 64-bit C arithmetic, where the masks change nothing); used only where `_C_HASH`, which checks
    it against hash() at import."""
    return _xx_done(_xx_round(_xx_round(_X5, a), b), 2)


def int_hash(r: int) -> int:
    """hash(r) of an int -2**63 <= r < 2**63 (a hash value): |r| modulo _MODULUS (a Mersenne prime: a mask,
    a shift and one subtraction), with r's sign, -1 made -2 (|r| = -(r + 1) + 1, which a C int holds for
    r = -2**63)."""
    if r >= 0:
        u = r
    else:
        u = -(r + 1)
        u += 1
    h = (u & _MODULUS) + (u >> 61)
    if h >= _MODULUS:
        h -= _MODULUS
    if r >= 0:
        return h
    if h == 1:
        return -2
    return -h


def _xx_round(acc: int, lane: int) -> int:
    """One round of CPython's tuple hash (xxHash's): acc after an item of hash `lane` (as pair_hash)."""
    u = lane & _M64
    acc = (acc + u * _X2) & _M64
    acc = ((acc << 31) | (acc >> 33)) & _M64
    return (acc * _X1) & _M64


def _xx_done(acc: int, n: int) -> int:
    """The hash of a tuple of n items from acc after their rounds (_xx_round from _X5, as pair_hash ends)."""
    acc = (acc + (n ^ (_X5 ^ 3527539))) & _M64
    if acc == _M64:
        return 1546275796
    if acc >> 63:
        r = _M64 - acc
        return -r - 1
    r = acc
    return r


def _triple_hash(a: int, b: int, c: int) -> int:
    """hash((x, y, z)) from a = hash(x), b = hash(y), c = hash(z) (as pair_hash)."""
    return _xx_done(_xx_round(_xx_round(_xx_round(_X5, a), b), c), 3)


def _hash_upto(c: BlockContent, n: int) -> int:
    """c.upto(n)'s work where keys chain and `_C_HASH` (compiled only: the values of upto's tuple hashes
    from the items' hashes, pair_hash and _xx_round, without the tuples): a run of whole blocks inside a
    segment is hashed key by key; a page across segments from its (cid, offset, length) pieces, as
    cross_page lists them."""
    out = c.out
    bs = c.bs
    segs = c.segs
    nseg = len(segs)
    i = c._i
    off = c._off
    have = len(out)
    start = have
    _reserve(out, min(n, have + (1 << 20)))  # noqa: F821 (hashing.pxd)
    h = hash(c._last)
    while have < n and i < nseg:
        seg = segs[i]
        length = seg[1]
        if length - off >= bs:  # whole blocks inside segment i
            k = min(n - have, (length - off) // bs)
            lead = _xx_round(_X5, hash(seg[0]))  # (pair_hash(hash(cid), o)'s first round, once per run)
            o = off
            stop = off + k * bs
            while o < stop:  # (bs > 0; pair_hash(h, pair_hash(hash(cid), hash(o))) in small C functions)
                r = _xx_done(_xx_round(_xx_round(_X5, h), _xx_done(_xx_round(lead, o if o < _MODULUS else
                                                                              o % _MODULUS), 2)), 2)
                _push_key(out, r)  # noqa: F821 (hashing.pxd: out.append(r), sooner)
                h = int_hash(r)
                o += bs
            have += k
            off = stop
            if off == length:
                i, off = i + 1, 0
            continue
        acc = _X5  # the page's pieces (cross_page's), hashed as its tuple of triples
        parts = 0
        need = bs
        while need and i < nseg:
            seg = segs[i]
            length = seg[1]
            take = min(length - off, need)
            acc = _xx_round(acc, _triple_hash(hash(seg[0]), off if off < _MODULUS else off % _MODULUS, take))
            parts += 1
            need -= take
            off += take
            if off == length:
                i, off = i + 1, 0
        if need:
            break  # content ended inside this block: it is not full
        r = pair_hash(h, _xx_done(acc, parts))
        _push_key(out, r)  # noqa: F821
        have += 1
        h = int_hash(r)
    c._i, c._off = i, off
    if have > start:
        c._last = out[have - 1]
    return 0


def _pair_hash_agrees() -> bool:
    """Whether pair_hash and int_hash agree with hash() of the tuples upto builds and of its keys (this
    interpreter's tuple and int hashes), on keys of both signs and offsets around the modulus."""
    p = _MODULUS
    for a in (0, 1, -1, -2, 12345, -(1 << 63), (1 << 63) - 1, p, -p, p + 1, -p - 1, p - 1, 1 - p, 2 * p,
              -2 * p, hash((3, (7, 16))), namespace_key("")):
        if int_hash(a) != hash(a):
            return False
        for c in (0, 5, UNIQUE_ID_BASE + 77, OUTPUT_ID_BASE, (1 << 62) - 1):
            for o in (0, 16, 4096, _MODULUS - 1, _MODULUS, _MODULUS + 16, UNBOUNDED - 16):
                r = pair_hash(hash(a), pair_hash(hash(c), o % _MODULUS))
                if r != hash((a, (c, o))) or int_hash(r) != hash(r):
                    return False
                pieces = ((c, o, 16), (a & ((1 << 62) - 1), 0, o % 97), (c + 1, o, 1 << 61))
                for k in (1, 2, 3):  # _hash_upto's pages across segments
                    acc = _X5
                    for p in pieces[:k]:
                        acc = _xx_round(acc, _triple_hash(hash(p[0]), hash(p[1]), hash(p[2])))
                    if pair_hash(hash(a), _xx_done(acc, k)) != hash((a, pieces[:k])):
                        return False
    return True


_COMPILED = not __file__.endswith(".py")
_C_HASH = _COMPILED and sys.hash_info.width == 64 and _pair_hash_agrees()
"""upto's chained keys come from _hash_upto (C hashes, no tuples): compiled only (as Python the tuples are
faster)."""


def block_keys(segments: tuple[tuple[int, int], ...], num_tokens: int, block_size: int,
               namespace: str | int = "") -> list[int]:
    """Chained keys of the full blocks among the first num_tokens tokens of the content."""
    n = num_tokens // block_size
    return BlockContent(segments, block_size, True, namespace).upto(n)[:n]


def page_keys(segments: tuple[tuple[int, int], ...], num_tokens: int, block_size: int) -> list:
    """Unchained page keys of the full blocks among the first num_tokens tokens of the content."""
    n = num_tokens // block_size
    return BlockContent(segments, block_size, False).upto(n)[:n]


def _content_segments(req, rid: int) -> list:
    """request_content(req)'s segments of positive length, as BlockContent keeps them (rid = req.rid), built
    into one list (ContentMemo.get's)."""
    plen = req.prompt_len
    segs = req.segments
    out = []
    if not segs:
        if plen > 0:
            out.append((UNIQUE_ID_BASE + rid, plen))
    else:
        short = plen
        for seg in segs:
            length = seg[1]
            short -= length
            if length > 0:
                out.append(seg)
        if short > 0:
            out.append((PAD_ID_BASE + rid, short))
    oid = req.output_id
    out.append((oid if oid >= 0 else OUTPUT_ID_BASE + rid, UNBOUNDED))
    return out


def _new_content(segs: list, block_size: int, chained: bool, root: int) -> BlockContent:
    """BlockContent(segments, block_size, chained, namespace) where segs are its segments of positive length
    and root = namespace_key(namespace), without the call's argument parsing (ContentMemo.get's)."""
    c = BlockContent.__new__(BlockContent)
    c.bs = block_size
    c.segs = segs
    c.out = []
    c.chained = chained
    c._i = 0
    c._off = 0
    c._last = root
    c.hint = None
    return c


KEPT = 1024
"""Contents a ContentMemo keeps for follow-ups (`keep`), at most, and at most KEPT_KEYS keys among them."""
KEPT_KEYS = 1 << 18


class ContentMemo:
    """The BlockContent of the requests looked up last (`size` of them, by request id): a request that waits
    is offered for admission again every iteration, and its keys should be computed once. One memo of a
    larger size may serve every replica of a fleet with the same block size (a router peeks at each of
    them for the same request; BlockContent is a pure function of the request).

    A cache `keep`s the content of a request whose sequence let its blocks go (with the table that held
    them); a follow-up of that request (`Request.after`, a conversation's next turn) then starts from its
    keys (BlockContent.resume) instead of hashing the shared history again. The most recent KEPT are kept."""

    __slots__ = ("block_size", "chained", "namespace", "size", "_rid", "_content", "_lru", "_kept",
                 "_kept_keys", "_root")

    def __init__(self, block_size: int, chained: bool, namespace: str | int = "", size: int = 1) -> None:
        self.block_size = block_size
        self.chained = chained
        self.namespace = namespace
        self.size = size
        self._rid = -1
        self._content: BlockContent | None = None
        self._lru: OrderedDict[int, BlockContent] = OrderedDict()
        self._kept: dict[int, tuple[BlockContent, list[int], int]] = {}
        self._kept_keys = 0
        self._root = namespace_key(namespace)

    def get(self, req) -> BlockContent:
        rid = req.rid
        if self._content is not None and self._rid == rid:
            return self._content
        lru = self._lru
        content = lru.get(rid) if self.size > 1 else None
        if content is None:
            content = _new_content(_content_segments(req, rid), self.block_size, self.chained, self._root)
            if self._kept:
                after = req.after
                if after >= 0:
                    kept = self._kept.pop(after, None)
                    if kept is not None:
                        self._kept_keys -= kept[2]
                        prev = kept[0]
                        table = kept[1]
                        kept = None  # (prev's last holder, unless others hold it)
                        content.resume(prev, table, _COMPILED and _sole_keys(prev))  # noqa: F821 (hashing.pxd)
            if self.size > 1:
                lru[rid] = content
                if len(lru) > self.size:
                    lru.popitem(last=False)
        else:
            lru.move_to_end(rid)
        self._content = content
        self._rid = rid
        return content

    def keep(self, rid: int, content: BlockContent, table: list[int]) -> None:
        """Request rid's sequence let go of table, whose blocks held content's keys: keep them for a
        follow-up of rid (the oldest kept go first, beyond KEPT contents or KEPT_KEYS keys), and as
        content's hint (its request admitted again)."""
        content.hint = table  # (the request admitted again, an admission undone or preempted: its blocks)
        kept = self._kept
        old = kept.pop(rid, None)
        if old is not None:
            self._kept_keys -= old[2]
        n = len(content.out)
        kept[rid] = (content, table, n)
        self._kept_keys += n
        cap = KEPT
        cap_keys = KEPT_KEYS
        while len(kept) > cap or self._kept_keys > cap_keys:
            self._kept_keys -= kept.pop(next(iter(kept)))[2]


def cached_upto(table_blocks: int, computed: int, block_size: int) -> int:
    """How many leading blocks of a freed sequence's table a prefix cache keys: those full of its
    `computed` tokens with KV (vLLM's cache_blocks: num_tokens // block_size), at most the table's; when
    the scheduler did not say (computed < 0: a prefill's blocks, keyed as allocated) every block but the
    last."""
    if computed < 0:
        return table_blocks - 1
    return min(table_blocks, computed // block_size)
