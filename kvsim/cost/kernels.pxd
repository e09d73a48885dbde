# C types for kernels.py when Cython compiles it (docs/speed.md): KernelCost an extension type on
# RooflineCost's (roofline.pxd), the fields forward_time reads every iteration C fields.
cimport cython

from kvsim.cost.roofline cimport RooflineCost


cdef class KernelCost(RooflineCost):
    cdef public dict _dense_memo
    cdef public object _decode, _prefill, _moe, _fallbacks
    cdef object _last_tokens, _last_seqs, _last_dense
    cdef bint _last_graph

    @cython.locals(graph=bint)
    cpdef forward_time(self, batch)
