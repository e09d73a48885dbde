# Cython types for decode_fast_path.py (docs/speed.md, "C types where they pay"): the scheduler it is a part
# of, typed as Admission, its chain but the last class (scheduler.py imports this module: the state is
# declared in preemption.pxd), so its fields are read as C fields and _grow is called as a C method.
cimport cython

from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_SET_ITEM
from cpython.object cimport PyTypeObject

from kvsim.engine.admission cimport Admission
from kvsim.engine.group cimport Group
from kvsim.kvcache.paged cimport PagedKVManager


cdef extern from "Python.h":
    # (cpython.type's declaration takes an object, which C then gets as a PyObject*: a warning, an error
    # under gcc 14's default)
    object PyType_GenericAlloc(PyTypeObject* type, Py_ssize_t nitems)


cdef bint _COMPILED


cdef tuple _TAIL


cdef inline void _put(object b, Py_ssize_t i, object o) noexcept:
    """b[i] = o in a tuple just allocated (its slot empty): o's reference taken."""
    Py_INCREF(o)
    PyTuple_SET_ITEM(b, i, o)


cdef inline object _decode_batch(type cls, n, context, blocks, no_bytes, copies):
    """tuple.__new__(cls, (n, 0, 0, 0.0, n, context, blocks, no_bytes, no_bytes, copies) + _TAIL) for
    Batch (a tuple subclass made by a class statement: its tp_alloc is PyType_GenericAlloc, as
    tuple.__new__ calls it): the instance allocated, each field put in its place."""
    cdef tuple tail = _TAIL
    cdef Py_ssize_t i, k = len(tail)
    b = PyType_GenericAlloc(<PyTypeObject*>cls, 10 + k)
    _put(b, 0, n)
    _put(b, 1, 0)
    _put(b, 2, 0)
    _put(b, 3, 0.0)
    _put(b, 4, n)
    _put(b, 5, context)
    _put(b, 6, blocks)
    _put(b, 7, no_bytes)
    _put(b, 8, no_bytes)
    _put(b, 9, copies)
    for i in range(k):
        _put(b, 10 + i, tail[i])
    return b


cdef class DecodeFastPath:
    cdef public Admission sched

    @cython.locals(s=Admission, it=Py_ssize_t, dec_seqs=Py_ssize_t, its=list, n=object, context=object,
                   fields=tuple, paged=PagedKVManager, head=Group, top=Py_ssize_t, copies_before=Py_ssize_t,
                   copies=Py_ssize_t, held=Py_ssize_t)
    cpdef schedule(self, now)
