# C types for request_flow.py when Cython compiles it (docs/speed.md): one run's per-request path (RequestFlow)
# is an extension type whose state is read from C fields, not from a Simulation's attribute dict; the
# finished group is read as the extension type it is, the request row appended by a C call.
cimport cython

from kvsim.engine.fleet.deployment cimport refusal
from kvsim.engine.group cimport Group
from kvsim.metrics.recorder cimport _Columns, append_values
from kvsim.workload.request cimport FollowUps


cdef class Due:
    cdef public object callbacks, _ok, _value


cdef class RequestFlow:
    cdef public object sim, env, progress, overhead, duration, gate, due, followups, open, held, tick
    cdef public object cluster, only, dispatch_cb, arrive_cb, eid
    cdef public list queue, ticks
    cdef public dict refusals
    cdef public tuple only_rule
    cdef public object only_kv
    cdef public list routed, replicas, max_model_len
    cdef public _Columns rows
    cdef public FollowUps table_followups
    cdef public Py_ssize_t seq_no, completed, total
    cdef public bint plain_rows

    cpdef arrive(self, _event)
    cpdef hand_on(self, r)
    cpdef to_engine(self, r, delay)
    cpdef dispatch_event(self, Due event)
    cpdef send(self, r)

    @cython.locals(replica=Py_ssize_t, n=Py_ssize_t, beams=Py_ssize_t, seq=Py_ssize_t)
    cpdef dispatch(self, r)

    cpdef release(self, r, t)

    @cython.locals(g=Group, fu=FollowUps)
    cpdef on_finish(self, g)

    cpdef record(self, r, Py_ssize_t replica, Group g)
