# C types for kernel_attention.py when Cython compiles it (docs/speed.md): the attention ops timed every
# iteration as extension types (their factor a C double: the same product as Python's float), the full
# and MLA ops reading their grid's Plane by a C call; math.sqrt / math.ceil are C's (the same sqrt; ceil's
# float result is made an int where used).
import cython
from libc cimport math

from kvsim.cost.kernel_grid cimport Plane
from kvsim.cost.roofline cimport _batch_tuple

cdef Py_ssize_t DECODE_CONTEXT_TOKENS, DECODE_SEQS  # (Batch's positions, C indices)
cdef bint _COMPILED


cpdef double whole_prompt(double pairs)


cdef class AttentionOp:
    cdef public object name, read, roofline, beyond, fallbacks, fitted
    cdef public double factor

    cpdef time(self, batch)
    cpdef outside(self, batch)


cdef class MeanContextOp(AttentionOp):
    cdef public object at
    cdef public Plane plane

    @cython.locals(plane=Plane, n_c=cython.longlong, context_c=cython.longlong, x=cython.double, fields=tuple)
    cpdef time(self, batch)


cdef class WholePromptOp(MeanContextOp):
    @cython.locals(plane=Plane, length=cython.double)
    cpdef time(self, batch)
