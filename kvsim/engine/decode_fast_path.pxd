# Cython types for decode_fast_path.py (docs/speed.md, "C types where they pay"): the scheduler it is a part
# of, typed as the root of the scheduler's chain (preemption.pxd declares its state), read as C fields.
cimport cython

from kvsim.engine.preemption cimport Preemption


cdef class DecodeFastPath:
    cdef public Preemption sched

    @cython.locals(s=Preemption, it=Py_ssize_t, dec_seqs=Py_ssize_t, its=list)
    cpdef schedule(self, now)
