# Cython types for radix_tree.py (docs/speed.md, "C types where they pay"): extension types with C integers
# for page counts, positions, block ids, locks and logical times (page keys stay Python objects).
cimport cython

from kvsim.kvcache.hashing cimport cross_page


cdef class PageRuns:
    cdef public Py_ssize_t bs
    cdef public list segs, starts, counts, firsts
    cdef public Py_ssize_t pages, _i, _off

    @cython.locals(pages=Py_ssize_t, bs=Py_ssize_t, nseg=Py_ssize_t, i=Py_ssize_t, off=Py_ssize_t,
                   length=Py_ssize_t, k=Py_ssize_t, segs=list)
    cpdef Py_ssize_t upto(self, Py_ssize_t n) except? -1

    @cython.locals(bs=Py_ssize_t, a=list, segs=list, n=Py_ssize_t, cap=Py_ssize_t, pos=Py_ssize_t, k=Py_ssize_t,
                   x=tuple, y=tuple, l1=Py_ssize_t, l2=Py_ssize_t, m=Py_ssize_t, firsts=list, r=Py_ssize_t,
                   i=Py_ssize_t, t=Py_ssize_t, nseg=Py_ssize_t)
    cpdef resume(self, PageRuns prev)

    @cython.locals(r=Py_ssize_t)
    cpdef key(self, Py_ssize_t i)

    @cython.locals(r=Py_ssize_t, u=Py_ssize_t, c=Py_ssize_t, bs=Py_ssize_t, firsts=list, starts=list,
                   counts=list, out_s=list, out_c=list)
    cpdef tuple runs(self, Py_ssize_t i, Py_ssize_t j)


@cython.locals(pr=PageRuns)
cpdef PageRuns new_runs(list segs, Py_ssize_t block_size)

@cython.locals(lo=Py_ssize_t, hi=Py_ssize_t, mid=Py_ssize_t, f=Py_ssize_t)
cpdef Py_ssize_t _run_of(list firsts, Py_ssize_t i) except? -2


cdef class RadixNode:
    cdef public list starts, counts, blocks
    cdef public RadixNode parent
    cdef public Py_ssize_t depth
    cdef public dict children
    cdef public long long lock, last, uses, birth


@cython.locals(r=Py_ssize_t, u=Py_ssize_t, left=Py_ssize_t, j=Py_ssize_t, k=Py_ssize_t, v=Py_ssize_t,
               na=Py_ssize_t, nb=Py_ssize_t, step=Py_ssize_t, bs=Py_ssize_t, firsts=list, starts=list,
               counts=list, kstarts=list, kcounts=list)
cpdef Py_ssize_t common_pages(RadixNode node, PageRuns pr, Py_ssize_t i, Py_ssize_t end) except? -1

@cython.locals(r=Py_ssize_t, c=Py_ssize_t)
cpdef tuple _cut(list starts, list counts, Py_ssize_t j, Py_ssize_t bs)


cdef class LeafQueue:
    cdef public object key
    cdef public int kind
    cdef public list _heap
    cdef public dict live
    cdef public long long _ticket

    @cython.locals(ticket=cython.longlong, kind=int, heap=list, live=dict, prio=object, t=cython.ulonglong)
    cpdef add(self, RadixNode node)

    cpdef discard(self, node)

    @cython.locals(heap=list, live=dict, row=tuple, node=RadixNode)
    cpdef RadixNode pop(self)


cdef class RadixTree:
    cdef public RadixNode root
    cdef public LeafQueue queue
    cdef public long long clock
    cdef public Py_ssize_t bs

    cpdef _enqueue(self, RadixNode node)

    @cython.locals(node=RadixNode, child=RadixNode, i=Py_ssize_t, j=Py_ssize_t, blocks=list)
    cpdef tuple match(self, PageRuns pr, Py_ssize_t n)

    @cython.locals(node=RadixNode, child=RadixNode, i=Py_ssize_t, j=Py_ssize_t)
    cpdef Py_ssize_t match_length(self, PageRuns pr, Py_ssize_t n) except? -1

    @cython.locals(mid=RadixNode)
    cpdef RadixNode split(self, RadixNode node, Py_ssize_t j)

    @cython.locals(clock=cython.longlong, depth=Py_ssize_t)
    cpdef RadixNode add_child(self, RadixNode parent, list starts, list counts, list blocks)

    cpdef grow(self, RadixNode node, list starts, list counts, list blocks)

    @cython.locals(root=RadixNode, cached=Py_ssize_t, b=Py_ssize_t, blocks=list, v=object)
    cpdef Py_ssize_t lock_path(self, RadixNode node, list rc) except? -1

    @cython.locals(root=RadixNode, held=Py_ssize_t, b=Py_ssize_t, blocks=list, clock=cython.longlong, v=object)
    cpdef Py_ssize_t unlock_path(self, RadixNode node, list rc, bint touch) except? -1

    cpdef lock(self, RadixNode node)
    cpdef lock_one(self, RadixNode node)
    cpdef unlock(self, RadixNode node, bint touch=*)
    cpdef hit(self, RadixNode node)

    @cython.locals(leaf=RadixNode, parent=RadixNode)
    cpdef RadixNode pop_leaf(self)
