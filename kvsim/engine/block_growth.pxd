# Cython types for block_growth.py (docs/speed.md, "C types where they pay"): C integers for iterations and
# block counts; the scheduler's state is declared on the chain's root (preemption.pxd).
cimport cython

from kvsim.engine.group cimport Group

from kvsim.engine.preemption cimport Preemption

from kvsim.kvcache.paged cimport PagedKVManager


cdef bint _COMPILED


cpdef _its_push(list heap, item)


@cython.locals(parentpos=Py_ssize_t, v=Py_ssize_t, pv=Py_ssize_t)
cpdef _its_sift_up(list heap, Py_ssize_t pos, item)


@cython.locals(end=Py_ssize_t, pos=Py_ssize_t, child=Py_ssize_t, right=Py_ssize_t, a=Py_ssize_t,
               b=Py_ssize_t)
cpdef _its_pop(list heap)


cpdef bint _grow_each_due(kv, list entries, offset) except -1


cdef class BlockGrowth(Preemption):
    cdef public PagedKVManager _paged

    cpdef _push_alloc(self, Py_ssize_t it, Group g)

    cpdef list _due_list(self, it)

    @cython.locals(paged=PagedKVManager)
    cpdef _schedule_next_alloc(self, Group g, next_decode=*)

    @cython.locals(nxt=object, grown=Py_ssize_t, delta=Py_ssize_t, blocks=Py_ssize_t, k=Py_ssize_t,
                   running=Py_ssize_t, single=bint, its=list, due=dict, later=list, entries=list, live=list,
                   e=tuple, entry=tuple, g=Group, paged=PagedKVManager, top=Py_ssize_t, epoch=Py_ssize_t,
                   base=Py_ssize_t)
    cpdef _grow(self, Py_ssize_t it)
