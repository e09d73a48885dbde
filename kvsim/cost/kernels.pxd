# C types for kernels.py when Cython compiles it (docs/speed.md): KernelCost an extension type on
# RooflineCost's (roofline.pxd), the fields forward_time reads every iteration C fields; the terms a
# dense-memo miss works out (linear, all-reduce) C methods, the linear curves' reads in C doubles (the
# same IEEE operations in the same order: math.log / math.exp are C's log / exp, which Python's call for
# a positive finite argument).
cimport cython
from libc cimport math

from kvsim.cost.kernel_attention cimport AttentionOp
from kvsim.cost.kernel_grid cimport _right
from kvsim.cost.roofline cimport RooflineCost, _batch_tuple

cdef Py_ssize_t DECODE_SEQS, PREFILL_SEQS, PREFILL_TOKENS, SPEC_TOKENS  # (Batch's positions, C indices)
cdef bint _COMPILED


cdef class _Curve:
    cdef public double lo, hi
    cdef public list log_m, log_t

    @cython.locals(lx=cython.double, xs=list, ys=list, j=Py_ssize_t, slope=cython.double)
    cpdef object at(self, double x)


cdef class KernelCost(RooflineCost):
    cdef public dict _dense_memo
    cdef public object _decode, _prefill, _moe, _fallbacks
    cdef public AttentionOp _decode_op, _prefill_op
    cdef object _last_tokens, _last_seqs, _last_dense
    cdef bint _last_graph

    @cython.locals(graph=bint, op=AttentionOp, fields=tuple)
    cpdef forward_time(self, batch)
    cpdef _fell_back(self, op)
    cpdef linear_kernel_time(self, tokens, seqs)
    cpdef _linear_uncached(self, tokens, seqs)
    cpdef allreduce_kernel_time(self, tokens, graph)
    cpdef _dense(self, tokens, seqs, graph, key)
