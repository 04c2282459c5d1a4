"""cuDNN's fp8 flash attention (through JAX's `jax._src.cudnn.fused_attention_stablehlo`) against its bf16
one, at the DiT's self-attention shapes on one GPU: time, and error against float32 (issue #24).

    python benchmarks/probe_fp8_attention.py --tokens 6144 24576 --heads 32 --repeats 20

fp8: q, k and v quantized to e4m3 with one scale each (448 / max |x|), the probabilities with 448
(they lie in [0, 1]), the output with 448 / max |v| (an average of v's rows cannot exceed it), then
dequantized to bf16. Reported per token count: the median time of bf16 attention, of the fp8 kernel
alone, and of fp8 with its quantize and dequantize passes; and for the first `--check-heads` heads,
the relative L2 and max relative error of each against float32 (XLA's attention in float32).
"""

import argparse
import json
import os
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.9")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax._src.cudnn import fused_attention_stablehlo as cudnn_attention  # noqa: E402

E4M3_MAX = 448.0


def quantize(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """`x` as e4m3 with one scale, and the descale (1 / scale) as cuDNN takes it, shape (1, 1, 1, 1)."""
    scale = E4M3_MAX / jnp.maximum(jnp.max(jnp.abs(x.astype(jnp.float32))), 1e-12)
    return (x.astype(jnp.float32) * scale).astype(jnp.float8_e4m3fn), jnp.reshape(1.0 / scale, (1, 1, 1, 1))


def fp8_kernel(q8, k8, v8, descale_q, descale_k, descale_v, amax_v):  # noqa: ANN001, ANN201
    one = jnp.ones((1, 1, 1, 1), jnp.float32)
    scale_o = jnp.reshape(E4M3_MAX / amax_v, (1, 1, 1, 1))
    params = {
        "descale_q": descale_q, "descale_k": descale_k, "descale_v": descale_v,
        "descale_s": one / E4M3_MAX, "scale_s": one * E4M3_MAX, "scale_o": scale_o,
        **{name: one for name in cudnn_attention.fp8_params_keys if name not in (
            "descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")},
    }  # fmt: skip
    out, _, _ = cudnn_attention.dot_product_attention(
        q8, k8, v8, fp8_params=params, scale=q8.shape[-1] ** -0.5, use_fp8=True, qkv_layout="BTNH"
    )
    return out, 1.0 / scale_o


@jax.jit
def fp8_attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    (q8, dq), (k8, dk), (v8, dv) = quantize(q), quantize(k), quantize(v)
    amax_v = jnp.max(jnp.abs(v.astype(jnp.float32)))
    out, descale_o = fp8_kernel(q8, k8, v8, dq, dk, dv, amax_v)
    return (out.astype(jnp.float32) * descale_o).astype(jnp.bfloat16)


@jax.jit
def bf16_attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    return jax.nn.dot_product_attention(q, k, v, implementation="cudnn")


@jax.jit
def f32_attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    return jax.nn.dot_product_attention(q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32))


def median_ms(fn, *args, repeats: int) -> float:  # noqa: ANN001, ANN002
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3)


def errors(out: jax.Array, expected: jax.Array) -> dict[str, float]:
    out, expected = np.asarray(out, np.float32), np.asarray(expected, np.float32)
    return {
        "relative_l2": float(np.linalg.norm(out - expected) / np.linalg.norm(expected)),
        "max_relative": float(np.abs(out - expected).max() / np.abs(expected).max()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[6144, 24576])
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--check-heads", type=int, default=2)
    args = parser.parse_args()
    print(jax.devices()[0].device_kind, jax.__version__)
    for tokens in args.tokens:
        shape = (1, tokens, args.heads, args.head_dim)
        keys = jax.random.split(jax.random.key(tokens), 3)
        # RMS-normed queries and keys as the DiT's (unit scale); values of the size its projections give
        q, k, v = (jax.random.normal(key, shape, jnp.bfloat16) for key in keys)
        row = {"tokens": tokens, "heads": args.heads, "head_dim": args.head_dim}
        row["bf16_ms"] = median_ms(bf16_attention, q, k, v, repeats=args.repeats)
        row["fp8_with_quantization_ms"] = median_ms(fp8_attention, q, k, v, repeats=args.repeats)
        (q8, dq), (k8, dk), (v8, dv) = quantize(q), quantize(k), quantize(v)
        amax_v = jnp.max(jnp.abs(v.astype(jnp.float32)))
        kernel = jax.jit(lambda *a: fp8_kernel(*a)[0])
        row["fp8_kernel_ms"] = median_ms(kernel, q8, k8, v8, dq, dk, dv, amax_v, repeats=args.repeats)
        flops = 4 * tokens * tokens * args.heads * args.head_dim
        row["bf16_tflops"] = flops / row["bf16_ms"] / 1e9
        row["fp8_kernel_tflops"] = flops / row["fp8_kernel_ms"] / 1e9
        row["fp8_over_bf16"] = row["fp8_with_quantization_ms"] / row["bf16_ms"]
        few = tuple(x[:, :, : args.check_heads] for x in (q, k, v))
        expected = f32_attention(*few)
        row["bf16_vs_f32"] = errors(bf16_attention(*few), expected)
        row["fp8_vs_f32"] = errors(fp8_attention(*few), expected)
        print(json.dumps(row))


if __name__ == "__main__":
    main()
