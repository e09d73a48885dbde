"""Triton runs kernels on the CPU under its interpreter here. TRITON_INTERPRET must be set before the first
import of triton anywhere in the session: triton.language's own @triton.jit helpers (tl.zeros ...) are
built at that import, and the interpreter cannot call them if they were built for a GPU."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")
