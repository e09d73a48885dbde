# C types for tiers_stack.py when Cython compiles it (docs/speed.md): StackedTiers is an extension type
# whose counts, cuts and positions are C integers (a tier holds fewer than 2^62 keys; capacities above are
# stored as 2^62); the keys stay Python objects (block keys are unbounded ints) in the line, and the position
# map is the C table `tab` (hash, position per slot; _C_TABLE).
import cython

cdef unsigned long long _FIB
cdef Py_ssize_t _MIN_BITS
cdef bint _C_TABLE

cdef class StackedTiers:
    cdef public Py_ssize_t n, base, end, dropped, slack, held, shift, mask, _at
    cdef public dict _pos
    cdef public list line
    cdef public long long[::1] starts, caps, counts, stores, loads, evictions, peaks, tab
    cdef public object occ

    cdef _table(self, Py_ssize_t bits)

    @cython.locals(u=cython.ulonglong)
    cdef inline Py_ssize_t _slot(self, Py_hash_t h) noexcept

    @cython.locals(mask=Py_ssize_t, i=Py_ssize_t, p=Py_ssize_t, x=object)
    cdef Py_ssize_t _find(self, object k, Py_hash_t h) except -2

    @cython.locals(i=Py_ssize_t)
    cdef _insert(self, Py_hash_t h, Py_ssize_t p)

    @cython.locals(old=cython.longlong[::1], tab=cython.longlong[::1], size=Py_ssize_t, mask=Py_ssize_t,
                   j=Py_ssize_t, p=Py_ssize_t, h=Py_hash_t, i=Py_ssize_t)
    cdef _grow(self)

    @cython.locals(tab=cython.longlong[::1], mask=Py_ssize_t, j=Py_ssize_t, p=Py_ssize_t, h=Py_hash_t)
    cdef _delete(self, Py_ssize_t i)

    cdef Py_ssize_t _get(self, object k) except -2

    @cython.locals(p=Py_ssize_t)
    cdef Py_ssize_t _remove(self, object k) except -2

    @cython.locals(line=list, base=Py_ssize_t, p=Py_ssize_t, k=object)
    cpdef _rebuild(self)

    @cython.locals(i=Py_ssize_t)
    cpdef Py_ssize_t tier_of(self, Py_ssize_t p) except -1

    @cython.locals(out=list, pos=dict, line=list, base=Py_ssize_t, low=Py_ssize_t, j=Py_ssize_t, k=object,
                   x=object, p=Py_ssize_t, q=Py_ssize_t, i=Py_ssize_t)
    cpdef list match(self, list keys, Py_ssize_t start, Py_ssize_t end)

    @cython.locals(pos=dict, line=list, base=Py_ssize_t, nxt=Py_ssize_t, cap0=Py_ssize_t, c0=Py_ssize_t,
                   s0=Py_ssize_t, peak0=Py_ssize_t, stores0=Py_ssize_t, evictions0=Py_ssize_t, stored=Py_ssize_t,
                   j=Py_ssize_t, box=object, k=object, h=Py_hash_t, in1=bint, cap1=Py_ssize_t, c1=Py_ssize_t,
                   peak1=Py_ssize_t, stores1=Py_ssize_t)
    cpdef Py_ssize_t offer(self, list keys) except -1

    @cython.locals(n=Py_ssize_t, cap=Py_ssize_t, c=Py_ssize_t, s=Py_ssize_t, base=Py_ssize_t, line=list)
    cdef _enter(self, Py_ssize_t i, Py_ssize_t j)

    @cython.locals(line=list, base=Py_ssize_t, j=Py_ssize_t, i=Py_ssize_t, p=Py_ssize_t)
    cpdef load(self, list keys, list tiers)

    @cython.locals(cap=Py_ssize_t, s=Py_ssize_t, line=list)
    cpdef resize(self, Py_ssize_t i, object capacity)

    @cython.locals(i=Py_ssize_t, occ=object)
    cpdef tuple occupancy(self)

    @cython.locals(i=Py_ssize_t)
    cpdef sync(self, list tiers)

    @cython.locals(old=list, base=Py_ssize_t, pos=dict, lo=Py_ssize_t, new=cython.longlong[::1], line=list,
                   i=Py_ssize_t, lo_i=Py_ssize_t, hi=Py_ssize_t, p=Py_ssize_t, k=object,
                   tab=cython.longlong[::1], j=Py_ssize_t)
    cdef _squeeze(self)
