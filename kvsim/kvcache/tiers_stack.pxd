# C types for tiers_stack.py when Cython compiles it (docs/speed.md): StackedTiers is an extension type
# whose counts, cuts and positions are C integers (a tier holds fewer than 2^62 keys; capacities above are
# stored as 2^62); the keys stay Python objects (block keys are unbounded ints), as do the dict's values.
import cython

cdef class StackedTiers:
    cdef public Py_ssize_t n, base, end, dropped, slack
    cdef public dict pos
    cdef public list line
    cdef public long long[::1] starts, caps, counts, stores, loads, evictions, peaks

    @cython.locals(i=Py_ssize_t)
    cpdef Py_ssize_t tier_of(self, Py_ssize_t p) except -1

    @cython.locals(out=list, pos=dict, line=list, base=Py_ssize_t, low=Py_ssize_t, j=Py_ssize_t, k=object,
                   x=object, p=object, q=Py_ssize_t, i=Py_ssize_t)
    cpdef list match(self, list keys, Py_ssize_t start, Py_ssize_t end)

    @cython.locals(pos=dict, line=list, base=Py_ssize_t, nxt=Py_ssize_t, cap0=Py_ssize_t, c0=Py_ssize_t,
                   s0=Py_ssize_t, peak0=Py_ssize_t, stores0=Py_ssize_t, evictions0=Py_ssize_t, stored=Py_ssize_t,
                   s=Py_ssize_t, box=object, k=object)
    cpdef Py_ssize_t offer(self, list keys) except -1

    @cython.locals(n=Py_ssize_t, cap=Py_ssize_t, c=Py_ssize_t, s=Py_ssize_t, base=Py_ssize_t, line=list)
    cdef _enter(self, Py_ssize_t i, Py_ssize_t j)

    @cython.locals(pos=dict, line=list, base=Py_ssize_t, j=Py_ssize_t, i=Py_ssize_t, p=Py_ssize_t,
                   held=Py_ssize_t)
    cpdef load(self, list keys, list tiers)

    @cython.locals(cap=Py_ssize_t, s=Py_ssize_t, line=list)
    cpdef resize(self, Py_ssize_t i, object capacity)

    @cython.locals(i=Py_ssize_t)
    cpdef tuple occupancy(self)

    @cython.locals(i=Py_ssize_t)
    cpdef sync(self, list tiers)
