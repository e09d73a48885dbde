# C types for block_pool.py when Cython compiles it (docs/speed.md): block ids, refcounts and positions are C
# integers in the per-block loop (the lists keep Python ints).
import cython

@cython.locals(n=Py_ssize_t, zeroed=list, start=Py_ssize_t, i=Py_ssize_t, b=Py_ssize_t, r=Py_ssize_t)
cpdef list drop(list rc, list ids, list kept)
