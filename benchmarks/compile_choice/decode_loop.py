"""A minimal continuous-batching decode loop: the prototype the compiler choice was measured on
(benchmarks/bench_compile_choice.py)."""


def run(n_req, prompt, output, max_seqs, num_blocks, block_size, a, b):
    ctx = []          # per running sequence: tokens with KV
    left = []         # per running sequence: tokens still to generate
    blocks = []       # per running sequence: blocks held
    free = num_blocks
    admitted = 0
    done = 0
    now = 0.0
    its = 0
    while done < n_req:
        # admit
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
        for c in ctx:
            total += c
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
