# C types for roofline.py when Cython compiles it (docs/speed.md): the cost model an extension type whose
# per-iteration terms are C fields (Python objects: the same arithmetic as before) and whose step_time
# calls forward_time as a C method; the rest of its state stays in its instance dict (`__dict__`: set and
# read by name as on a Python object, by factory.py's `expert_parallel` and `selected` too).
cdef class RooflineCost:
    cdef dict __dict__
    cdef public object overhead, seq_overhead, host_bw, bw, bytes_per_block

    cpdef step_time(self, batch)
    cpdef forward_time(self, batch)
