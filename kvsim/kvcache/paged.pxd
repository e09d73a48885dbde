# C types for paged.py when Cython compiles it (docs/speed.md, "C types where they pay"): grow_due's per-entry
# loop over typed containers (the classes stay Python classes: the prefix managers subclass them).
import cython

@cython.locals(i=Py_ssize_t, e=tuple, table=list)
cpdef _append_each(dict tables, dict ntok, list entries, list ids, offset)
