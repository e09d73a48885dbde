# Cython types for admission.py (docs/speed.md, "C types where they pay"): C integers for token and block
# counts; the scheduler's state is declared on the chain's root (preemption.pxd).
cimport cython

from kvsim.engine.group cimport Group

from kvsim.engine.block_growth cimport BlockGrowth

from kvsim.kvcache.paged cimport PagedKVManager


cdef class Admission(BlockGrowth):
    cpdef _push(self, list heap, Py_ssize_t it, Group g)

    cpdef _start_chunk(self, Group g, Py_ssize_t chunk)

    cpdef _prefill_only(self, now, copies_before)

    cpdef _swap_in(self, now)

    @cython.locals(cached=Py_ssize_t, remote=Py_ssize_t, remaining=Py_ssize_t, chunk=Py_ssize_t,
                   need=Py_ssize_t, free=Py_ssize_t, hit_tokens=Py_ssize_t, handed=bint, blocked=bint, g=Group, paged=PagedKVManager)
    cpdef _admit(self, now)
