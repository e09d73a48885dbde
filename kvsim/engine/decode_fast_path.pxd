# Cython types for decode_fast_path.py (docs/speed.md, "C types where they pay"): the scheduler it is a part
# of, typed as Admission, its chain but the last class (scheduler.py imports this module: the state is
# declared in preemption.pxd), so its fields are read as C fields and _grow is called as a C method.
cimport cython

from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from cpython.type cimport PyType_GenericAlloc

from kvsim.engine.admission cimport Admission
from kvsim.engine.group cimport Group
from kvsim.kvcache.paged cimport PagedKVManager


cdef bint _COMPILED


cdef inline object _new_batch(type cls, tuple fields):
    """tuple.__new__(cls, fields) for a tuple subclass made by a class statement (its tp_alloc is
    PyType_GenericAlloc, as tuple.__new__ calls it): the instance allocated, each field put in its place."""
    cdef Py_ssize_t i, n = len(fields)
    b = PyType_GenericAlloc(cls, n)
    for i in range(n):
        o = fields[i]
        Py_INCREF(o)
        PyTuple_SET_ITEM(b, i, o)
    return b


cdef class DecodeFastPath:
    cdef public Admission sched

    @cython.locals(s=Admission, it=Py_ssize_t, dec_seqs=Py_ssize_t, its=list, n=object, context=object,
                   fields=tuple, paged=PagedKVManager, head=Group, top=Py_ssize_t, copies_before=Py_ssize_t,
                   copies=Py_ssize_t, held=Py_ssize_t)
    cpdef schedule(self, now)
