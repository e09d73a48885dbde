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

    @cython.locals(m=Py_ssize_t, i=Py_ssize_t, t=Py_ssize_t, segs=list, pos=Py_ssize_t, a=list, b=list,
                   j=Py_ssize_t, l1=Py_ssize_t, l2=Py_ssize_t, sl=Py_ssize_t)
    cpdef resume(self, BlockContent prev, list table)

    @cython.locals(out=list, bs=Py_ssize_t, segs=list, nseg=Py_ssize_t, i=Py_ssize_t, off=Py_ssize_t,
                   length=Py_ssize_t, stop=Py_ssize_t, o=Py_ssize_t, chained=bint, hc=Py_hash_t,
                   h=Py_hash_t, r=Py_hash_t)
    cpdef list upto(self, Py_ssize_t n)

cdef class ContentMemo:
    cdef public Py_ssize_t block_size, size, _kept_keys
    cdef public bint chained
    cdef public object namespace, _rid, _lru
    cdef public BlockContent _content
    cdef public dict _kept

    @cython.locals(content=BlockContent, kept=tuple)
    cpdef BlockContent get(self, req)

    @cython.locals(kept=dict, old=tuple, n=Py_ssize_t)
    cpdef keep(self, rid, BlockContent content, list table)

# pair_hash: hashes are C Py_hash_t values by definition (hash() returns one); the tuple hash's unsigned
# 64-bit arithmetic wraps in C as the Python source's masks do (the constants below are those of CPython's
# tuplehash), and the result stays a Python int where upto stores it.
cdef unsigned long long _M64, _X1, _X2, _X5, _XLEN2
cdef Py_ssize_t _MODULUS
cdef bint _C_HASH

@cython.locals(acc=cython.ulonglong, lane=cython.ulonglong, r=Py_hash_t)
cdef Py_hash_t pair_hash(Py_hash_t a, Py_hash_t b) noexcept

@cython.locals(u=cython.ulonglong, h=Py_hash_t)
cdef Py_hash_t int_hash(Py_hash_t r) noexcept

# cross_page: a C call from BlockContent.upto (the pages that cross a segment's end), over C integers.
@cython.locals(parts=list, need=Py_ssize_t, nseg=Py_ssize_t, length=Py_ssize_t, take=Py_ssize_t)
cpdef tuple cross_page(list segs, Py_ssize_t i, Py_ssize_t off, Py_ssize_t bs)

cpdef tuple request_content(req)
