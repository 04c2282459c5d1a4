"""The DiT's linear layers alone: JAX with the weight as (in, out), as flax stores it, and as (out, in),
as torch stores it, against torch's `F.linear` on the same GPU.

    python benchmarks/bench_matmul_layout.py                  # T = 6144 and 24576 rows
    python benchmarks/bench_matmul_layout.py --tokens 6144 --repeats 20

The profile of one forward (benchmarks/profile_step.py) showed XLA's cuBLAS calls running other kernels
than torch's for the same products (e.g. 128x128 tiles "NNT" where torch runs 256x128 "TNT"); this
times each product shape of a block (bf16, with bias, as in the model) in both weight layouts.
Prints milliseconds per product and TFLOP/s. Needs a CUDA GPU and torch with CUDA.
"""

import argparse
import os
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # entry point: share the GPU with torch

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

# (in, out) of the block's token-wise linears: attention q/k/v/out, FFN up and down, audio-video q/out.
SHAPES = ((4096, 4096), (4096, 16384), (16384, 4096), (4096, 2048), (2048, 4096))


def time_queued(call, sync, repeats: int) -> float:  # noqa: ANN001
    """Seconds per call: `repeats` calls queued back to back, one sync (dispatch hides behind the GPU)."""
    call()
    sync()
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    sync()
    return (time.perf_counter() - start) / repeats


def jax_times(tokens: int, k: int, n: int, repeats: int) -> tuple[float, float]:
    """(weight (in, out), weight (out, in)) seconds per `x @ W + b`."""
    keys = jax.random.split(jax.random.key(tokens + k + n), 3)
    x = jax.random.normal(keys[0], (tokens, k), jnp.bfloat16)
    w = jax.random.normal(keys[1], (k, n), jnp.bfloat16) / k**0.5
    b = jax.random.normal(keys[2], (n,), jnp.bfloat16)
    w_out_in = jnp.asarray(w.T)  # a separate (n, k) row-major array, as torch keeps its weights
    in_out = jax.jit(lambda x, w, b: x @ w + b)
    out_in = jax.jit(lambda x, w, b: jnp.einsum("tk,nk->tn", x, w) + b)
    np.testing.assert_allclose(
        np.asarray(in_out(x, w, b), np.float32), np.asarray(out_in(x, w_out_in, b), np.float32), rtol=2e-2, atol=2e-2
    )
    results = []
    for fn, weight in ((in_out, w), (out_in, w_out_in)):
        latest = {}

        def call(fn=fn, weight=weight, latest=latest) -> None:  # noqa: ANN001
            latest["y"] = fn(x, weight, b)

        results.append(time_queued(call, lambda latest=latest: latest["y"].block_until_ready(), repeats))
    return results[0], results[1]


def torch_time(tokens: int, k: int, n: int, repeats: int) -> float:
    x = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    return time_queued(lambda: torch.nn.functional.linear(x, w, b), torch.cuda.synchronize, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[6144, 24576])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    print(f"{jax.devices()[0].device_kind}; jax {jax.__version__}, torch {torch.__version__}; bf16, with bias")
    print("| rows | in -> out | jax W(in,out) | jax W(out,in) | torch F.linear | TFLOP/s, same order |")
    print("|---|---|---|---|---|---|")
    for tokens in args.tokens:
        for k, n in SHAPES:
            in_out, out_in = jax_times(tokens, k, n, args.repeats)
            theirs = torch_time(tokens, k, n, args.repeats)
            tflops = [2 * tokens * k * n / s / 1e12 for s in (in_out, out_in, theirs)]
            print(
                f"| {tokens} | {k} -> {n} | {in_out * 1e3:.3f} ms | {out_in * 1e3:.3f} ms | {theirs * 1e3:.3f} ms | "
                + " / ".join(f"{t:.0f}" for t in tflops)
                + " |"
            )
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
