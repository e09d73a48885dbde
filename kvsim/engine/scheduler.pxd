# Cython types for scheduler.py (docs/speed.md, "C types where they pay"): the scheduler is an extension
# type, the end of the chain Preemption <- BlockGrowth <- Admission <- Scheduler; its state is declared on
# the root (preemption.pxd). C integers for iterations, token and block counts.
cimport cython

from kvsim.engine.group cimport Group

from kvsim.engine.admission cimport Admission

from kvsim.kvcache.paged cimport PagedKVManager


cdef class Scheduler(Admission):
    cpdef has_work(self)

    cpdef token_slots(self)

    @cython.locals(total=Py_ssize_t, paged=PagedKVManager, g=Group)
    cpdef Py_ssize_t prefill_blocks(self) except? -1

    @cython.locals(held=Py_ssize_t)
    cpdef context_sums(self)

    @cython.locals(blocks=Py_ssize_t)
    cpdef _join_decode(self, Group g, Py_ssize_t it_done)

    cpdef _begin(self, now)

    @cython.locals(heap=list, top=Py_ssize_t, g=Group)
    cpdef completes_quietly(self)

    @cython.locals(its=list, first=Py_ssize_t)
    cpdef _schedule(self, now)

    cpdef _schedule_rest(self, now, copies_before)

    @cython.locals(it=Py_ssize_t, p_tokens=Py_ssize_t, pairs=cython.double, g=Group, c=Py_ssize_t,
                   dec_seqs=Py_ssize_t, dec_blocks=Py_ssize_t, out=Py_ssize_t, ioff=Py_ssize_t,
                   iextra=Py_ssize_t)
    cpdef _batch(self, list prefills, swap_in_blocks, copies_before, bint decodes)

    @cython.locals(it=Py_ssize_t, it_done=Py_ssize_t, running=Py_ssize_t, paused=bint, finished=list, heap=list,
                   g=Group, top=Py_ssize_t, epoch=Py_ssize_t)
    cpdef complete(self, t_end)

    cpdef _finish(self, Group g, t_end)
