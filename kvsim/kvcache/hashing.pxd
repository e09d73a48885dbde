# C types for hashing.py when Cython compiles it (docs/speed.md): BlockContent is an extension type whose
# block size, segment index and offset are C integers (segment lengths are below UNBOUNDED = 2**62); content
# ids and keys (hashes) stay Python ints.
import cython

cdef class BlockContent:
    cdef public Py_ssize_t bs
    cdef public list segs, out
    cdef public bint chained
    cdef public Py_ssize_t _i, _off
    cdef public object _last, hint

    @cython.locals(out=list, bs=Py_ssize_t, segs=list, nseg=Py_ssize_t, i=Py_ssize_t, off=Py_ssize_t,
                   length=Py_ssize_t, stop=Py_ssize_t, o=Py_ssize_t, chained=bint)
    cpdef list upto(self, Py_ssize_t n)
