# Cython types for decode_fast_path.py (docs/speed.md, "C types where they pay"): the scheduler it is a part
# of, typed as Admission, its chain but the last class (scheduler.py imports this module: the state is
# declared in preemption.pxd), so its fields are read as C fields and _grow is called as a C method.
cimport cython

from kvsim.engine.admission cimport Admission


cdef class DecodeFastPath:
    cdef public Admission sched

    @cython.locals(s=Admission, it=Py_ssize_t, dec_seqs=Py_ssize_t, its=list, n=object, context=object)
    cpdef schedule(self, now)
