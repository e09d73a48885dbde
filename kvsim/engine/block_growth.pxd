# Cython types for block_growth.py (docs/speed.md, "C types where they pay"): C integers for iterations and
# block counts; the scheduler's state is declared on the chain's root (preemption.pxd).
cimport cython

from kvsim.engine.group cimport Group

from kvsim.engine.preemption cimport Preemption

from kvsim.kvcache.paged cimport PagedKVManager


cdef class BlockGrowth(Preemption):
    cdef public PagedKVManager _paged

    cpdef _push_alloc(self, Py_ssize_t it, Group g)

    cpdef list _due_list(self, Py_ssize_t it)

    cpdef _schedule_next_alloc(self, Group g, next_decode=*)

    @cython.locals(nxt=Py_ssize_t, grown=Py_ssize_t, delta=Py_ssize_t, blocks=Py_ssize_t, k=Py_ssize_t,
                   running=Py_ssize_t, single=bint, its=list, due=dict, later=list, entries=list, live=list,
                   e=tuple, entry=tuple, g=Group, paged=PagedKVManager)
    cpdef _grow(self, it)
