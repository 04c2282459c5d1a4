"""Attention alone at the shapes sequence parallelism hands each device, JAX backends against torch SDPA.

    python scripts/bench_attention.py                     # T in (6144, 24576), H in (4, 32), D=128, bf16
    python scripts/bench_attention.py --tokens 6144 --heads 4 --repeats 20

After the Ulysses all-to-all each of n devices attends all T tokens with H/n heads: T=6144 and 24576
are LTX-2's stage-1 and stage-2 video token counts; H=4 is 32 heads on 8 devices, H=32 one device.
Rows: XLA (scores materialized), cuDNN (`jax.nn.dot_product_attention(implementation="cudnn")`),
cuDNN with a key-padding mask given as `key_value_seq_lengths` (what SP uses for pad keys), the
Pallas Mosaic GPU FlashAttention-3 kernel (`jax.experimental.pallas.ops.gpu.attention_mgpu`, no
mask support; best of a few tile configs), and torch SDPA without and with a boolean key mask.
FLOPs: 4 * B * H * T^2 * D (non-causal). Timings: median of warmed-up calls, each a loop of
`--inner` attentions inside one jitted program (JAX) or CUDA-event timed (torch).
"""

import argparse
import itertools
import os
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # entry point: share the GPU with torch

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

PAD_KEYS = 7  # a key mask that hides the last few keys, as SP's padding does


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[6144, 24576])
    parser.add_argument("--heads", type=int, nargs="+", default=[4, 32])
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--inner", type=int, default=5, help="attentions per timed JAX program")
    return parser.parse_args()


def time_jax(fn, q, k, v, repeats: int, inner: int) -> float:  # noqa: ANN001
    """Seconds per attention: `inner` chained calls in one jitted loop, median over `repeats`."""

    def body(_, carry):  # noqa: ANN001, ANN202
        return fn(carry, k, v).astype(q.dtype)

    loop = jax.jit(lambda q: jax.lax.fori_loop(0, inner, body, q))
    jax.block_until_ready(loop(q))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(loop(q))
        times.append((time.perf_counter() - start) / inner)
    return float(np.median(times))


def time_torch(fn, repeats: int, inner: int) -> float:  # noqa: ANN001
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / inner)
    return float(np.median(times))


def jax_rows(t: int, h: int, d: int, args: argparse.Namespace) -> dict[str, float | str]:
    key = jax.random.split(jax.random.key(0), 3)
    q, k, v = (jax.random.normal(kk, (1, t, h, d), jnp.bfloat16) for kk in key)
    lengths = jnp.full((1,), t - PAD_KEYS, jnp.int32)
    rows: dict[str, float | str] = {}
    candidates = {
        "xla": lambda q, k, v: jax.nn.dot_product_attention(q, k, v, implementation="xla"),
        "cudnn": lambda q, k, v: jax.nn.dot_product_attention(q, k, v, implementation="cudnn"),
        "cudnn + key lengths": lambda q, k, v: jax.nn.dot_product_attention(
            q, k, v, key_value_seq_lengths=lengths, implementation="cudnn"
        ),
    }
    for name, fn in candidates.items():
        if name == "xla" and t * t * h * 4 > 8e9:  # the materialized scores would not fit comfortably
            rows[name] = "skipped (scores > 8 GB)"
            continue
        rows[name] = time_jax(fn, q, k, v, args.repeats, args.inner)
    rows["pallas mgpu (no mask)"] = mgpu_best(q, k, v, args)
    return rows


def mgpu_best(q: jax.Array, k: jax.Array, v: jax.Array, args: argparse.Namespace) -> float | str:
    try:
        from jax.experimental.pallas.ops.gpu import attention_mgpu  # noqa: PLC0415
    except ImportError as error:
        return f"unavailable ({error})"
    best, errors = None, []
    for block_q, block_kv, steps in itertools.product((64, 128), (64, 128), (2, 4)):
        config = attention_mgpu.TuningConfig(block_q=block_q, block_kv=block_kv, max_concurrent_steps=steps)
        try:
            seconds = time_jax(lambda q, k, v, c=config: attention_mgpu.attention(q, k, v, c), q, k, v, 3, args.inner)
        except Exception as error:  # noqa: BLE001 - a tile config the kernel rejects: try the next one
            errors.append(f"{block_q}/{block_kv}/{steps}: {type(error).__name__}")
            continue
        if best is None or seconds < best[0]:
            best = (seconds, config)
    if best is None:
        return f"failed ({'; '.join(errors[:2])})"
    config = best[1]
    return time_jax(lambda q, k, v: attention_mgpu.attention(q, k, v, config), q, k, v, args.repeats, args.inner)


def torch_rows(t: int, h: int, d: int, args: argparse.Namespace) -> dict[str, float]:
    q, k, v = (torch.randn(1, h, t, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    mask = torch.ones(1, 1, 1, t, device="cuda", dtype=torch.bool)
    mask[..., t - PAD_KEYS :] = False
    sdpa = torch.nn.functional.scaled_dot_product_attention
    return {
        "torch sdpa": time_torch(lambda: sdpa(q, k, v), args.repeats, args.inner),
        "torch sdpa + key mask": time_torch(lambda: sdpa(q, k, v, attn_mask=mask), args.repeats, args.inner),
    }


def main(args: argparse.Namespace) -> None:
    print(f"{jax.devices()[0].device_kind}; jax {jax.__version__}, torch {torch.__version__}")
    d = args.head_dim
    for t, h in itertools.product(args.tokens, args.heads):
        flops = 4 * h * t * t * d
        rows = {**jax_rows(t, h, d, args), **torch_rows(t, h, d, args)}
        reference = rows["torch sdpa"]
        print(f"\nT={t}, H={h}, D={d}, bf16 ({flops / 1e12:.2f} TFLOP per call)")
        for name, seconds in rows.items():
            if isinstance(seconds, str):
                print(f"  {name:<24} {seconds}")
                continue
            ratio = reference / seconds
            print(
                f"  {name:<24} {seconds * 1e3:8.3f} ms  {flops / seconds / 1e12:6.0f} TFLOP/s  {ratio:5.2f}x torch sdpa"
            )


if __name__ == "__main__":
    main(parse_args())
