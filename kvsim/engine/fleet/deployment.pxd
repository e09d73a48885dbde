# C types for deployment.py when Cython compiles it (docs/speed.md): the refusal check every request
# passes (refusal, a C function the engine calls with the request's counts already read) in C integers.
cimport cython


@cython.locals(limit=Py_ssize_t, block_size=Py_ssize_t, num_blocks=Py_ssize_t, above_watermark=Py_ssize_t,
               total=Py_ssize_t, seqs=Py_ssize_t, blocks=Py_ssize_t)
cpdef refusal(d, tuple rule, first_kv, r, Py_ssize_t prompt, Py_ssize_t output, Py_ssize_t n,
              Py_ssize_t beams)
