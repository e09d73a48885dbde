# C types for block_queue.py when Cython compiles it (docs/speed.md): BlockQueue is an extension type with
# C-integer counts; priorities and tickets stay Python ints (unbounded), block ids Python ints (the loops store
# them: a C int would make a new Python int per store; pop_many indexes with a C copy).
import cython

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
                   late=bint, rows=list, i=Py_ssize_t)
    cpdef list pop_many(self, Py_ssize_t k)
