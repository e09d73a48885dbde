# C types for tiers.py when Cython compiles it (docs/speed.md): Tier and TierChain are extension types (the
# same fields as their __slots__); a Tier's counters are C integers, a TierChain's StackedTiers a typed
# reference, so the chain's calls to it and its copy of the counters to the Tier objects are C calls and C
# stores. The methods stay Python-callable (def).
import cython

from kvsim.kvcache.tiers_stack cimport StackedTiers

cdef class Tier:
    cdef public object name, capacity_blocks, policy, strategy, _held
    cdef public bint shared, queue, refresh
    cdef public long long stores, loads, evictions, peak

cdef class TierChain:
    cdef public list tiers, _helds, _orders, _stales
    cdef public bint exclusive, _queues
    cdef public Py_ssize_t chunk_blocks, min_uses, dropped
    cdef public dict _seen
    cdef public StackedTiers _stack

    @cython.locals(stack=StackedTiers, i=Py_ssize_t, t=Tier, tiers=list)
    cdef _sync(self)
