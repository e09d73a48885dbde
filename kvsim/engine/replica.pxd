# C types for replica.py when Cython compiles it (docs/speed.md): the replica's state in C fields of an
# extension type (read every iteration), the per-iteration step and the back-to-back loop C-level methods;
# the scheduler typed (its counters are read as C fields, its methods called as C methods), the timeline
# rows appended by a C call into the recorder.
cimport cython

from kvsim.cost.roofline cimport _batch_tuple
from kvsim.engine.decode_fast_path cimport DecodeFastPath
from kvsim.engine.scheduler cimport Scheduler
from kvsim.kvcache.block_pool cimport BlockPool
from kvsim.kvcache.block_queue cimport BlockQueue
from kvsim.kvcache.hash_pool cimport HashCachePool
from kvsim.kvcache.paged cimport PagedKVManager
from kvsim.kvcache.radix cimport RadixPool
from kvsim.metrics.recorder cimport _Columns, append_timeline, append_values


cdef bint _COMPILED


@cython.locals(pos=Py_ssize_t, parentpos=Py_ssize_t, t=cython.double, pt=cython.double, less=bint)
cpdef _push_tick(list heap, tuple item)


cdef class Replica:
    cdef public object index, role, env, cost, rec, on_finish, check, pacing, extra_columns, exact
    cdef public Scheduler sched
    cdef public object fast, fast_iterations, _wakeup
    cdef object _tick, _on_tick_cb, _schedule, _step_time, _context_sums, _token_states, _breakdown, _eid
    cdef _Columns _timeline
    cdef list _queue, _ticks
    cdef public bint _paged
    cdef DecodeFastPath _fast_path
    cdef Py_ssize_t _block_size, _slots, _counts

    cpdef wake(self)

    @cython.locals(sched=Scheduler)
    cpdef _turn(self, bint ended)

    @cython.locals(sched=Scheduler, finished=list, queue=list, ticks=list, fast_path=DecodeFastPath)
    cpdef _advance(self, now, bint ended)

    @cython.locals(sched=Scheduler, paged=PagedKVManager, pool=BlockPool, evictable=BlockQueue, radix=RadixPool,
                   hash_pool=HashCachePool, fields=tuple,
                   counts=Py_ssize_t, cached=Py_ssize_t, used=Py_ssize_t, allocated=Py_ssize_t,
                   states=Py_ssize_t, reservation=Py_ssize_t, internal=Py_ssize_t, external=Py_ssize_t,
                   free=Py_ssize_t, unshared=Py_ssize_t, preempted=Py_ssize_t)
    cpdef _step(self, batch, now)

    @cython.locals(sched=Scheduler, n=Py_ssize_t, fast_path=DecodeFastPath)
    cpdef _fast_forward(self, end, horizon)
