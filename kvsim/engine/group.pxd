# C types for group.py when Cython compiles it (docs/speed.md, "C types where they pay"): the group is an
# extension type; its token, block, iteration and state counts are C integers (they fit: counts and ids),
# everything else (times that may be ints or floats, containers, the request) stays a Python object.


cdef class Group:
    cdef public object req, seqs, forked, first_scheduled_s, first_token_s, finish_s, ready_s, hit_by_tier
    cdef public object load_wait_s, tier_loaded, prefill_done_s, last_chunk_s, decode_admit_s, kv_arrival_s
    cdef public object kv_transfer_bytes, kv_transfer_s, past_windows
    cdef public Py_ssize_t order, output, prompt, n, computed, generated, state, phase, base, gen_base, epoch
    cdef public Py_ssize_t chunk, preemptions, cached_tokens, seq_blocks, replica, remote_tokens
    cdef public Py_ssize_t prefill_replica
