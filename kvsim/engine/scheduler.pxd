# Cython types for scheduler.py (docs/speed.md, "C types where they pay"): the scheduler is an extension
# type, the end of the chain Preemption <- BlockGrowth <- Admission <- Scheduler; its state is declared on
# the root (preemption.pxd). C integers for iterations, token and block counts.
cimport cython

from kvsim.engine.group cimport Group

from kvsim.engine.admission cimport Admission


cdef class Scheduler(Admission):
    cpdef has_work(self)

    @cython.locals(paused=Py_ssize_t, held=Py_ssize_t)
    cpdef token_slots(self)

    @cython.locals(held=Py_ssize_t)
    cpdef context_sums(self)

    @cython.locals(blocks=Py_ssize_t)
    cpdef _join_decode(self, Group g, Py_ssize_t it_done)

    cpdef _begin(self, now)

    cpdef completes_quietly(self)

    cpdef _schedule(self, now)

    cpdef _schedule_rest(self, now, copies_before)

    cpdef _batch(self, list prefills, swap_in_blocks, copies_before, bint decodes)

    @cython.locals(it=Py_ssize_t, it_done=Py_ssize_t, running=Py_ssize_t, paused=bint, finished=list, heap=list,
                   g=Group)
    cpdef complete(self, t_end)

    cpdef _hand_off(self, g, t_end)

    cpdef _finish(self, Group g, t_end)
