"""decode_loop.py with Cython pure-Python-mode C types on the locals (the same loop, typed)."""

import cython


@cython.ccall
def run(n_req: cython.long, prompt: cython.long, output: cython.long, max_seqs: cython.long,
        num_blocks: cython.long, block_size: cython.long, a: cython.double, b: cython.double):
    ctx: list = []
    left: list = []
    blocks: list = []
    free: cython.long = num_blocks
    admitted: cython.long = 0
    done: cython.long = 0
    now: cython.double = 0.0
    its: cython.long = 0
    need: cython.long
    total: cython.long
    i: cython.Py_ssize_t
    c: cython.long
    last: cython.Py_ssize_t
    while done < n_req:
        while admitted < n_req and len(ctx) < max_seqs:
            need = (prompt + block_size - 1) // block_size
            if need > free:
                break
            free -= need
            ctx.append(prompt)
            left.append(output)
            blocks.append(need)
            admitted += 1
        total = 0
        for x in ctx:
            total += x
        now += a + b * total
        its += 1
        i = 0
        while i < len(ctx):
            c = ctx[i] + 1
            ctx[i] = c
            left[i] -= 1
            if c % block_size == 1:
                free -= 1
                blocks[i] += 1
            if left[i] == 0:
                free += blocks[i]
                last = len(ctx) - 1
                ctx[i] = ctx[last]
                left[i] = left[last]
                blocks[i] = blocks[last]
                ctx.pop()
                left.pop()
                blocks.pop()
                done += 1
            else:
                i += 1
    return its, now
