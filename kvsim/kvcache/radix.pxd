# Cython types for radix.py (docs/speed.md, "C types where they pay"): C integers for block ids and indexes.
cimport cython

@cython.locals(b=Py_ssize_t)
cpdef _forget(list blocks, bytearray in_tree, list rc)

@cython.locals(b=Py_ssize_t)
cpdef _mark(list blocks, bytearray in_tree)

@cython.locals(t=Py_ssize_t)
cpdef Py_ssize_t _first_shared(list rc, list table, Py_ssize_t i, Py_ssize_t end) except? -1
