# C types for request.py when Cython compiles it (docs/speed.md): FollowUps is an extension type whose
# offsets and children (int64 arrays) are read through typed memoryviews (C reads, no int per read); the
# engine calls its pop as a C method (kvsim/engine/request_flow.pxd).
cimport cython


cdef class FollowUps:
    cdef public object table, offsets, children
    cdef public bytearray taken
    cdef const long long[:] _offsets, _children

    @cython.locals(taken=bytearray, lo=cython.longlong, hi=cython.longlong, offsets="const long long[:]")
    cpdef pop(self, Py_ssize_t rid, default=*)
