# C types for kernel_grid.py when Cython compiles it (docs/speed.md): a two-axis grid's reads in C doubles,
# the same IEEE operations in the same order as Python's floats (math.log / math.exp are C's log / exp,
# which Python's call for a positive finite argument; cell indices are C integers).
import cython
from libc cimport math


cdef class Plane:
    cdef public list ax, ay, lx, ly, values
    cdef public dict cells
    cdef public tuple cell
    cdef public double x_lo, x_hi, y_lo, y_hi, a, b, c, d
    cdef public double x_min, x_max, y_min, y_max

    @cython.locals(u=cython.double, v=cython.double)
    cpdef object at2(self, double x, double y)

    @cython.locals(ax=list, ay=list, r0=list, r1=list, i=Py_ssize_t, j=Py_ssize_t, lo_v=cython.double,
                   hi_v=cython.double, l0=cython.double, l1=cython.double, tx=cython.double, ty=cython.double,
                   sx=cython.double, sy=cython.double, w=cython.double, v=cython.double, total=cython.double)
    cpdef object _at2_cell(self, double x, double y)

    @cython.locals(coeffs=tuple, key=Py_ssize_t)
    cpdef _keep_cell(self, Py_ssize_t i, Py_ssize_t j)


@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t, v=cython.double)
cpdef Py_ssize_t _right(list a, double x) except -1
