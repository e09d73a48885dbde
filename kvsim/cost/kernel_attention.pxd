# C types for kernel_attention.py when Cython compiles it (docs/speed.md): the attention ops timed every
# iteration as extension types (their factor a C double: the same product as Python's float).


cdef class AttentionOp:
    cdef public object name, read, roofline, beyond, fallbacks, fitted
    cdef public double factor

    cpdef time(self, batch)
    cpdef outside(self, batch)


cdef class MeanContextOp(AttentionOp):
    cdef public object at

    cpdef time(self, batch)
