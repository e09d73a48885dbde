# C types for hashing.py when Cython compiles it (docs/speed.md): BlockContent is an extension type whose
# block size, segment index and offset are C integers (segment lengths are below UNBOUNDED = 2**62); content
# ids and keys (hashes) stay Python ints.
import cython
from cpython.ref cimport PyObject

cdef class BlockContent:
    cdef public Py_ssize_t bs
    cdef public list segs, out
    cdef public bint chained
    cdef public Py_ssize_t _i, _off
    cdef public object _last, hint

    @cython.locals(m=Py_ssize_t, i=Py_ssize_t, t=Py_ssize_t, segs=list, pos=Py_ssize_t, a=list, b=list,
                   j=Py_ssize_t, l1=Py_ssize_t, l2=Py_ssize_t, sl=Py_ssize_t, s1=object, s2=object, out=list)
    cpdef resume(self, BlockContent prev, list table, bint take=*)

    @cython.locals(out=list, bs=Py_ssize_t, segs=list, nseg=Py_ssize_t, i=Py_ssize_t, off=Py_ssize_t,
                   length=Py_ssize_t, stop=Py_ssize_t, o=Py_ssize_t, chained=bint, hc=Py_hash_t,
                   h=Py_hash_t, r=Py_hash_t)
    cpdef list upto(self, Py_ssize_t n)

cdef class ContentMemo:
    cdef public Py_ssize_t block_size, size, _kept_keys
    cdef public bint chained
    cdef public object namespace, _rid, _lru, _root
    cdef public BlockContent _content
    cdef public dict _kept

    @cython.locals(content=BlockContent, kept=tuple, lru=object, after=object, prev=BlockContent, table=list)
    cpdef BlockContent get(self, req)

    @cython.locals(kept=dict, old=tuple, n=Py_ssize_t, cap=Py_ssize_t, cap_keys=Py_ssize_t)
    cpdef keep(self, rid, BlockContent content, list table)

# pair_hash: hashes are C Py_hash_t values by definition (hash() returns one); the tuple hash's unsigned
# 64-bit arithmetic wraps in C as the Python source's masks do (the constants below are those of CPython's
# tuplehash), and the result stays a Python int where upto stores it.
cdef unsigned long long _M64, _X1, _X2, _X5
cdef Py_ssize_t _MODULUS
cdef bint _C_HASH, _COMPILED


# _key_int(r): the Python int r, a key (a hash value): on CPython 3.11 (30-bit digits), one of at least 2**30
# in absolute value (all but one key in 2**33) is built as its two or three digits directly (what
# PyLong_FromLongLong builds, without its digit counting loops); otherwise, and on other versions,
# PyLong_FromLongLong. _reserve(items, n): room for n items in the list (its allocation grown as list.append
# grows it, once: _hash_upto's keys appended without the reallocations on the way; nothing on PyPy or the
# limited API). _push_key(items, r): items.append(_key_int(r)), stored in place where there is room.
cdef extern from *:
    """
    static CYTHON_INLINE Py_ssize_t __pyx_kvsim_refcnt(PyObject *o) { return Py_REFCNT(o); }

    static CYTHON_INLINE PyObject *__pyx_kvsim_key_int(Py_hash_t r) {
    #if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000 && PyLong_SHIFT == 30 && \
        !defined(Py_LIMITED_API) && !defined(PYPY_VERSION)
        unsigned long long u = r < 0 ? 0ULL - (unsigned long long)r : (unsigned long long)r;
        if (u >> 30) {
            Py_ssize_t n = (u >> 60) ? 3 : 2;
            PyLongObject *v = _PyLong_New(n);
            if (v == NULL) return NULL;
            v->ob_digit[0] = (digit)(u & PyLong_MASK);
            v->ob_digit[1] = (digit)((u >> 30) & PyLong_MASK);
            if (n == 3) v->ob_digit[2] = (digit)(u >> 60);
            if (r < 0) Py_SET_SIZE(v, -n);
            return (PyObject *)v;
        }
    #endif
        return PyLong_FromLongLong((long long)r);
    }

    static CYTHON_INLINE int __pyx_kvsim_push_key(PyObject *list, Py_hash_t r) {
        PyObject *v = __pyx_kvsim_key_int(r);
        if (v == NULL) return -1;
    #if !defined(Py_LIMITED_API) && !defined(PYPY_VERSION)
        {
            PyListObject *l = (PyListObject *)list;
            Py_ssize_t n = Py_SIZE(l);
            if (n < l->allocated) {
                l->ob_item[n] = v;
                Py_SET_SIZE(l, n + 1);
                return 0;
            }
        }
    #endif
        {
            int rc = PyList_Append(list, v);
            Py_DECREF(v);
            return rc;
        }
    }

    static int __pyx_kvsim_reserve(PyObject *list, Py_ssize_t n) {
    #if !defined(Py_LIMITED_API) && !defined(PYPY_VERSION)
        PyListObject *l = (PyListObject *)list;
        if (l->allocated < n) {
            size_t want = (size_t)n + ((size_t)n >> 3) + 6;
            PyObject **items;
            if (want > (size_t)PY_SSIZE_T_MAX / sizeof(PyObject *)) return 0;
            items = (PyObject **)PyMem_Realloc(l->ob_item, want * sizeof(PyObject *));
            if (items == NULL) { PyErr_NoMemory(); return -1; }
            l->ob_item = items;
            l->allocated = (Py_ssize_t)want;
        }
    #endif
        return 0;
    }
    """
    Py_ssize_t _refcnt "__pyx_kvsim_refcnt"(PyObject *o) noexcept
    object _key_int "__pyx_kvsim_key_int"(Py_hash_t r)
    int _reserve "__pyx_kvsim_reserve"(list items, Py_ssize_t n) except -1
    int _push_key "__pyx_kvsim_push_key"(list items, Py_hash_t r) except -1


cdef inline bint _sole_keys(BlockContent prev) noexcept:
    """Whether the caller's reference is prev's only one and prev's the only one to its key list (nothing
    else can see prev or the list: ContentMemo.get's resume may take the list)."""
    return _refcnt(<PyObject*>prev) == 1 and _refcnt(<PyObject*>prev.out) == 1


cdef Py_hash_t pair_hash(Py_hash_t a, Py_hash_t b) noexcept

@cython.locals(u=cython.ulonglong, h=Py_hash_t)
cdef Py_hash_t int_hash(Py_hash_t r) noexcept

# cross_page: a C call from radix_tree (and BlockContent.upto where _hash_upto does not serve), over C integers.
@cython.locals(parts=list, need=Py_ssize_t, nseg=Py_ssize_t, length=Py_ssize_t, take=Py_ssize_t)
cpdef tuple cross_page(list segs, Py_ssize_t i, Py_ssize_t off, Py_ssize_t bs)

cpdef tuple request_content(req)

@cython.locals(u=cython.ulonglong)
cdef unsigned long long _xx_round(unsigned long long acc, Py_hash_t lane) noexcept

@cython.locals(r=Py_hash_t)
cdef Py_hash_t _xx_done(unsigned long long acc, Py_ssize_t n) noexcept

cdef Py_hash_t _triple_hash(Py_hash_t a, Py_hash_t b, Py_hash_t c) noexcept


# _hash_upto: BlockContent.upto's keys where they chain and _C_HASH (C hashes over C integers).
@cython.locals(out=list, bs=Py_ssize_t, segs=list, nseg=Py_ssize_t, i=Py_ssize_t, off=Py_ssize_t,
               have=Py_ssize_t, start=Py_ssize_t, h=Py_hash_t, lead=cython.ulonglong, r=Py_hash_t,
               length=Py_ssize_t, k=Py_ssize_t, o=Py_ssize_t, stop=Py_ssize_t, acc=cython.ulonglong,
               parts=Py_ssize_t, need=Py_ssize_t, take=Py_ssize_t)
cdef int _hash_upto(BlockContent c, Py_ssize_t n) except -1

@cython.locals(plen=Py_ssize_t, segs=object, out=list, short=Py_ssize_t, length=Py_ssize_t, oid=object)
cdef list _content_segments(req, rid)

@cython.locals(c=BlockContent)
cdef BlockContent _new_content(list segs, Py_ssize_t block_size, bint chained, root)


cpdef Py_ssize_t cached_upto(Py_ssize_t table_blocks, Py_ssize_t computed, Py_ssize_t block_size) except? -1
