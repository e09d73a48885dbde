# C types for block_queue.py when Cython compiles it (docs/speed.md): BlockQueue is an extension type with
# C-integer counts; priorities and tickets stay Python ints (unbounded), block ids Python ints (the loops store
# them: a C int would make a new Python int per store; the row loops index with a C copy and read tickets as C
# integers: clock values). The C helpers below are the compiled row loops and heapq's push / pop / replace
# (the same algorithm, so the same heap after every step), comparing entries (head, ticket, rows, top) by
# their head and ticket as C integers where they fit (else as the tuples compare).
import cython
from cpython.object cimport Py_LE, Py_LT
from cpython.list cimport PyList_New
from cpython.ref cimport PyObject

cdef bint _COMPILED
cdef long long _BITS, _MAXD

cdef extern from "Python.h":
    PyObject* _lget "PyList_GET_ITEM" (PyObject* o, Py_ssize_t i)
    void _lset "PyList_SET_ITEM" (PyObject* o, Py_ssize_t i, PyObject* v)
    Py_ssize_t _lsize "PyList_GET_SIZE" (PyObject* o)
    void _setsize "Py_SET_SIZE" (PyObject* o, Py_ssize_t n)
    PyObject* _tget "PyTuple_GET_ITEM" (PyObject* o, Py_ssize_t i)
    bint _is_int "PyLong_CheckExact" (PyObject* o)
    int _richcmp "PyObject_RichCompareBool" (PyObject* a, PyObject* b, int op)
    int _setslice "PyList_SetSlice" (PyObject* o, Py_ssize_t lo, Py_ssize_t hi, PyObject* v)
    void _incref "Py_INCREF" (PyObject* o)
    void _decref "Py_DECREF" (PyObject* o)

cdef extern from *:
    """
    /* An exact int's value as a C integer: CPython 3.11's one or two digit ints read directly (the clock
       values, block ids and priorities here), else the C API's conversion. */
    static CYTHON_INLINE long long __bq_as_ll(PyObject* o, int* overflow) {
    #if PY_VERSION_HEX < 0x030C0000 && !defined(PYPY_VERSION) && PyLong_SHIFT == 30
        const digit* d = ((PyLongObject*)o)->ob_digit;
        switch (Py_SIZE(o)) {
            case 0: *overflow = 0; return 0;
            case 1: *overflow = 0; return (long long)d[0];
            case 2: *overflow = 0; return (long long)d[0] | ((long long)d[1] << 30);
            default: break;
        }
    #endif
        return PyLong_AsLongLongAndOverflow(o, overflow);
    }
    static CYTHON_INLINE Py_ssize_t __bq_index(PyObject* o) {
    #if PY_VERSION_HEX < 0x030C0000 && !defined(PYPY_VERSION) && PyLong_SHIFT == 30
        if (Py_SIZE(o) == 1) return (Py_ssize_t)((PyLongObject*)o)->ob_digit[0];
        if (Py_SIZE(o) == 0) return 0;
    #endif
        return PyLong_AsSsize_t(o);
    }
    static CYTHON_INLINE Py_ssize_t __bq_allocated(PyObject* o) { return ((PyListObject*)o)->allocated; }
    """
    long long _as_ll "__bq_as_ll" (PyObject* o, int* overflow)
    Py_ssize_t _as_index "__bq_index" (PyObject* o)
    Py_ssize_t _allocated "__bq_allocated" (PyObject* o)


cdef inline int _lt(PyObject* a, PyObject* b) noexcept:
    """Heap entries a < b, as the tuples compare (1, 0; -1 on an error): (head, ticket) as C integers when
    both are ints that fit (tickets are unique: they decide), else the tuples' comparison."""
    cdef int oa = 0, ob = 0
    cdef long long x, y
    cdef PyObject* p = _tget(a, 0)
    cdef PyObject* q = _tget(b, 0)
    if _is_int(p) and _is_int(q):
        x = _as_ll(p, &oa)
        y = _as_ll(q, &ob)
        if not oa and not ob:
            if x != y:
                return x < y
            p = _tget(a, 1)
            q = _tget(b, 1)
            if _is_int(p) and _is_int(q):
                x = _as_ll(p, &oa)
                y = _as_ll(q, &ob)
                if not oa and not ob and x != y:
                    return x < y
    return _richcmp(a, b, Py_LT)


cdef inline int _siftdown(PyObject* heap, Py_ssize_t startpos, Py_ssize_t pos) except -1:
    """heapq._siftdown (the items move within the list: no reference changes)."""
    cdef PyObject* newitem = _lget(heap, pos)
    cdef PyObject* parent
    cdef Py_ssize_t parentpos
    cdef int c
    while pos > startpos:
        parentpos = (pos - 1) >> 1
        parent = _lget(heap, parentpos)
        c = _lt(newitem, parent)
        if c < 0:
            _lset(heap, pos, newitem)
            return -1
        if not c:
            break
        _lset(heap, pos, parent)
        pos = parentpos
    _lset(heap, pos, newitem)
    return 0


cdef inline int _siftup(PyObject* heap, Py_ssize_t pos) except -1:
    """heapq._siftup."""
    cdef Py_ssize_t endpos = _lsize(heap)
    cdef Py_ssize_t startpos = pos
    cdef Py_ssize_t childpos = 2 * pos + 1
    cdef PyObject* newitem = _lget(heap, pos)
    cdef int c
    while childpos < endpos:
        if childpos + 1 < endpos:
            c = _lt(_lget(heap, childpos), _lget(heap, childpos + 1))
            if c < 0:
                _lset(heap, pos, newitem)
                return -1
            if not c:
                childpos += 1
        _lset(heap, pos, _lget(heap, childpos))
        pos = childpos
        childpos = 2 * pos + 1
    _lset(heap, pos, newitem)
    return _siftdown(heap, startpos, pos)


cdef inline int _heapify(list heap) except -1:
    """heapq.heapify (its sift-ups in another order for big lists, to the same heap)."""
    cdef Py_ssize_t i
    for i in range(len(heap) // 2 - 1, -1, -1):
        _siftup(<PyObject*>heap, i)
    return 0


cdef inline int _le_p(PyObject* x, PyObject* y) except -1:
    """x <= y: as C integers when both are ints that fit, else as they compare."""
    cdef int ox = 0, oy = 0
    cdef long long u, v
    if _is_int(x) and _is_int(y):
        u = _as_ll(x, &ox)
        v = _as_ll(y, &oy)
        if not ox and not oy:
            return u <= v
    return _richcmp(x, y, Py_LE)


cdef inline int _le(object x, object y) except -1:
    """x <= y (_le_p)."""
    return _le_p(<PyObject*>x, <PyObject*>y)


cdef inline object _bound(list heap, object top):
    """pop_many's bound of the root batch's rows: the smaller key of its children (top when it has none)."""
    cdef PyObject* h = <PyObject*>heap
    cdef Py_ssize_t n = _lsize(h)
    cdef PyObject* a
    cdef PyObject* b
    if n == 1:
        return top
    a = _tget(_lget(h, 1), 0)
    if n == 2:
        return <object>a
    b = _tget(_lget(h, 2), 0)
    if _le_p(a, b):
        return <object>a
    return <object>b


cdef inline int _push(list heap, tuple item) except -1:
    """heapq.heappush."""
    heap.append(item)
    return _siftdown(<PyObject*>heap, 0, len(heap) - 1)


cdef inline int _pop(list heap) except -1:
    """heapq.heappop of a non-empty heap, the item dropped."""
    cdef PyObject* h = <PyObject*>heap
    cdef Py_ssize_t n = _lsize(h) - 1
    cdef PyObject* last = _lget(h, n)
    cdef PyObject* top
    _setsize(h, n)  # (the list's reference to last is ours now)
    if not n:
        _decref(last)
        return 0
    top = _lget(h, 0)
    _lset(h, 0, last)
    try:
        return _siftup(h, 0)
    finally:
        _decref(top)


cdef inline int _replace(list heap, tuple item) except -1:
    """heapq.heapreplace of a non-empty heap, the item replaced dropped."""
    cdef PyObject* h = <PyObject*>heap
    cdef PyObject* top = _lget(h, 0)
    _incref(<PyObject*>item)
    _lset(h, 0, <PyObject*>item)
    try:
        return _siftup(h, 0)
    finally:
        _decref(top)


cdef inline void _put0(PyObject* items, Py_ssize_t i, PyObject* zero) noexcept:
    """items[i] = zero without the checks."""
    cdef PyObject* old = _lget(items, i)
    _incref(zero)
    _lset(items, i, zero)
    _decref(old)


cdef inline Py_ssize_t _take(list rows, list filed, list rc, Py_ssize_t t, Py_ssize_t need, list out,
                             object zero) except -1:
    """pop_many's loop over a batch whose live rows all sort first (block ids and clock values ints that fit):
    pops rows from the end while any and need; a row of ticket t (filed) gets filed 0, and goes to out when
    its block is at refcount 0. Returns need left."""
    cdef PyObject* r = <PyObject*>rows
    cdef PyObject* fl = <PyObject*>filed
    cdef PyObject* rcl = <PyObject*>rc
    cdef PyObject* o = <PyObject*>out
    cdef Py_ssize_t n = _lsize(r)
    cdef Py_ssize_t i, j
    cdef PyObject* b
    while n and need:
        n -= 1
        b = _lget(r, n)
        _setsize(r, n)  # (rows' reference to b is ours now)
        i = _as_index(b)
        if _as_index(_lget(fl, i)) == t:
            _put0(fl, i, <PyObject*>zero)
            if _as_index(_lget(rcl, i)) == 0:
                j = _lsize(o)
                if j < _allocated(o):  # (our reference to b moves to out)
                    _lset(o, j, b)
                    _setsize(o, j + 1)
                else:
                    try:
                        out.append(<object>b)
                    finally:
                        _decref(b)
                need -= 1
                continue
        _decref(b)
    return need


cdef inline list _reserve(Py_ssize_t k):
    """An empty list with room for k items (pop_many's out: its appends never reallocate)."""
    cdef list out = PyList_New(k)
    _setsize(<PyObject*>out, 0)
    return out


cdef inline int _drop_last(list rows) noexcept:
    """rows.pop() of a non-empty list, the item dropped."""
    cdef PyObject* r = <PyObject*>rows
    cdef Py_ssize_t n = _lsize(r) - 1
    cdef PyObject* b = _lget(r, n)
    _setsize(r, n)  # (rows' reference to b is ours now)
    _decref(b)
    return 0


cdef inline Py_ssize_t _keep(list rows, list filed, list rc, Py_ssize_t t, object zero) except -1:
    """_compact's loop over a batch (block ids and clock values ints that fit): keeps, in order, the rows of
    ticket t whose blocks are at refcount 0; a held block's row of ticket t goes with its filed set to 0.
    Returns how many rows are kept."""
    cdef PyObject* r = <PyObject*>rows
    cdef PyObject* fl = <PyObject*>filed
    cdef PyObject* rcl = <PyObject*>rc
    cdef Py_ssize_t n = _lsize(r)
    cdef Py_ssize_t j, i
    cdef Py_ssize_t w = 0
    cdef PyObject* b
    for j in range(n):
        b = _lget(r, j)
        i = _as_index(b)
        if _as_index(_lget(fl, i)) == t:
            if _as_index(_lget(rcl, i)) == 0:
                if w != j:  # (a swap: the list stays a permutation of its items)
                    _lset(r, j, _lget(r, w))
                    _lset(r, w, b)
                w += 1
            else:
                _put0(fl, i, <PyObject*>zero)
    if w != n:
        _setslice(r, w, n, NULL)
    return w


cdef inline object _prio_c(list last, list depth, Py_ssize_t b, bint lru):
    """BlockQueue.prio of block b for lru (lru) or length in C integers, the same Python int; None when its
    bookkeeping is out of the range where that is exact (the caller computes it as Python)."""
    cdef int o1 = 0, o2 = 0
    cdef long long l, d
    cdef PyObject* p
    cdef PyObject* q
    if b < 0 or b >= len(last) or b >= len(depth):
        return None
    p = _lget(<PyObject*>last, b)
    q = _lget(<PyObject*>depth, b)
    if not _is_int(p) or not _is_int(q):
        return None
    l = _as_ll(p, &o1)
    d = _as_ll(q, &o2)
    if o1 or o2 or l < 0 or d < 0 or d > _MAXD:
        return None
    if lru:
        if _BITS > 40 or l >= (1LL << (62 - _BITS)):
            return None
        return (l << _BITS) | (_MAXD - d)
    if _BITS > 24 or l >= (1LL << 40):
        return None
    return (<unsigned long long>(_MAXD - d) << 40) | <unsigned long long>l


cdef class BlockQueue:
    cdef public object key
    cdef public list rc, filed, last, uses, birth, depth
    cdef public bint _lru, _runs
    cdef public list _heap
    cdef public Py_ssize_t count, _rows

    cpdef object prio(self, object b)

    @cython.locals(depth=list, prev=Py_ssize_t, d=Py_ssize_t, b=Py_ssize_t)
    cpdef add_run(self, list rows, object ticket)

    cpdef add_ascending(self, list rows, object ticket)

    cpdef add_many(self, list rows, object ticket)

    cpdef _file(self, list rows, object ticket, object head, object top)

    @cython.locals(rc=list, filed=list, heap=list, kept=list, rows=list, t=Py_ssize_t, i=Py_ssize_t,
                   f=Py_ssize_t)
    cpdef _compact(self)

    @cython.locals(filed=list, lost=list)
    cpdef revive(self, list rows, object ticket)

    @cython.locals(heap=list, rc=list, filed=list, out=list, need=Py_ssize_t, n=Py_ssize_t, was=Py_ssize_t,
                   late=bint, rows=list, i=Py_ssize_t, t=Py_ssize_t,
                   f=Py_ssize_t, first=bint)
    cpdef list pop_many(self, Py_ssize_t k)
