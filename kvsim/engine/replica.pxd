# C types for replica.py when Cython compiles it (docs/speed.md): the replica's state in C fields of an
# extension type (read every iteration), the per-iteration step a C-level method; the scheduler typed (its
# counters are read as C fields, its methods called as C methods).
cimport cython

from kvsim.engine.scheduler cimport Scheduler


cdef class Replica:
    cdef public object index, role, env, cost, rec, on_finish, check, pacing, extra_columns, exact
    cdef public Scheduler sched
    cdef public object fast, fast_iterations, _wakeup, process
    cdef object _step_time, _append, _context_sums, _token_states, _breakdown

    @cython.locals(sched=Scheduler)
    cpdef _step(self, batch, now)
