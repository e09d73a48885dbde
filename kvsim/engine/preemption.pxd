# Cython types for preemption.py (docs/speed.md, "C types where they pay"). Preemption is the root of the
# scheduler's single-parent chain Preemption <- BlockGrowth <- Admission <- Scheduler, so the scheduler's
# whole state is declared here (set in Scheduler.__init__): C integers for counts, token sums, iterations
# and budgets, C doubles for the two times it keeps, typed containers; every attribute stays readable and
# writable from Python (`public`). The held offset stays a Python object (a sizing's deltas).
cimport cython

from kvsim.engine.group cimport Group


cdef class Preemption:
    cdef public object lim, kv, tier_waits, handoff, lora, sizing, _resize_fn, _figures_fn, _no_bytes
    cdef public object waiting, swapped, beam, win, windows, schedule_decodes, dec_held_offset
    cdef public dict running, prefilling, _alloc_due
    cdef public list _alloc_its, _finish_heap, _scheduled_prefills
    cdef public bint _sends, _by_context, _prefill_first, _admit_after_preemption, _admit_while_swapped
    cdef public bint _paused, _chunked
    cdef public double _now, _load_wait
    cdef public Py_ssize_t bs, _budget, _swap_out_blocks, it, iterations, _charge, _push_no
    cdef public Py_ssize_t running_seqs, dec_seqs, dec_base_sum, dec_blocks, prefill_tokens_held
    cdef public Py_ssize_t preempted_now, preempted_unrecorded, total_preemptions, _max_seqs, _max_tokens, _watermark

    @cython.locals(paused=Py_ssize_t, held_tokens=Py_ssize_t, off=Py_ssize_t)
    cdef Py_ssize_t _int_slots(self) except? -1

    cpdef _hand_off(self, g, t_end)

    @cython.locals(n=Py_ssize_t)
    cpdef take_preempted(self)

    @cython.locals(done=Py_ssize_t)
    cpdef _preempt_last(self)

    cpdef _leave_decode(self, Group g)

    @cython.locals(total=Py_ssize_t)
    cpdef Py_ssize_t _blocks_of(self, list seqs) except? -1

    @cython.locals(total=Py_ssize_t)
    cpdef Py_ssize_t _private_of(self, list seqs) except? -1

    cpdef _free_decoded(self, seq, tokens)

    @cython.locals(need=Py_ssize_t)
    cpdef _alloc_or_preempt(self, g, seqs, tokens)
