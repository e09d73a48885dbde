# C types for roofline.py when Cython compiles it (docs/speed.md): the cost model an extension type whose
# per-iteration terms are C fields (Python objects: the same arithmetic as before) and whose step_time
# calls forward_time as a C method; the rest of its state stays in its instance dict (`__dict__`: set and
# read by name as on a Python object, by factory.py's `expert_parallel` and `selected` too).
cimport cython
from cpython.tuple cimport PyTuple_Check, PyTuple_GET_SIZE

cdef bint _COMPILED


cdef inline tuple _batch_tuple(object batch):
    """The Batch (a NamedTuple: a tuple subclass) as a tuple reference, read then by C indexing (refused
    unless a tuple of Batch's 21 fields, as unpacking it into them would be). Replica._step reads it so too."""
    if not PyTuple_Check(batch):
        raise TypeError(f"a batch is a tuple, not {type(batch).__name__}")
    if PyTuple_GET_SIZE(batch) != 21:
        raise ValueError(f"a batch has 21 fields, not {PyTuple_GET_SIZE(batch)}")
    return <tuple>batch


cdef class RooflineCost:
    cdef dict __dict__
    cdef public object overhead, seq_overhead, host_bw, bw, bytes_per_block

    @cython.locals(fields=tuple)
    cpdef step_time(self, batch)
    cpdef forward_time(self, batch)
