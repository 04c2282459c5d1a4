"""cuDNN's fp8 flash attention (through JAX's `jax._src.cudnn.fused_attention_stablehlo`) against its bf16
one, at the DiT's self-attention shapes on one GPU: time, and error against float32 (issue #24).

    python benchmarks/probe_fp8_attention.py --tokens 6144 24576 --heads 32 --repeats 20

fp8: q, k and v quantized to e4m3 with one scale each (`quantize_per_tensor`: max |x| / 448), the
probabilities with 448 (they lie in [0, 1]), the output with v's scale (an average of v's rows cannot
exceed max |v|), then dequantized to bf16. Reported per token count: the median time of bf16 attention,
of the fp8 kernel alone, and of fp8 with its quantize and dequantize passes; and for the first `--check-heads` heads,
the relative L2 and max relative error of each against float32 (XLA's attention in float32).
"""

import argparse
import json
import os

os.environ.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.9")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax._src.cudnn import fused_attention_stablehlo as cudnn_attention  # noqa: E402
from probe_fp8_gemm import median_ms  # noqa: E402 - beside this script

from ltx_jax.model.quantization import FP8_MAX, quantize_per_tensor  # noqa: E402


def quantize(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """`x` as e4m3 with one scale, and that scale (the descale cuDNN takes), shape (1, 1, 1, 1)."""
    values, scale = quantize_per_tensor(x)
    return values, jnp.reshape(scale, (1, 1, 1, 1))


def fp8_kernel(q8, descale_q, k8, descale_k, v8, descale_v):  # noqa: ANN001, ANN201
    """cuDNN's fp8 attention; its e4m3 output has v's scale, returned with it."""
    one = jnp.ones((1, 1, 1, 1), jnp.float32)
    params = {
        "descale_q": descale_q, "descale_k": descale_k, "descale_v": descale_v,
        "descale_s": one / FP8_MAX, "scale_s": one * FP8_MAX, "scale_o": 1.0 / descale_v,
        **{name: one for name in cudnn_attention.fp8_params_keys if name not in (
            "descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")},
    }  # fmt: skip
    out, _, _ = cudnn_attention.dot_product_attention(
        q8, k8, v8, fp8_params=params, scale=q8.shape[-1] ** -0.5, use_fp8=True, qkv_layout="BTNH"
    )
    return out, descale_v


@jax.jit
def fp8_attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    out, descale_o = fp8_kernel(*quantize(q), *quantize(k), *quantize(v))
    return (out.astype(jnp.float32) * descale_o).astype(jnp.bfloat16)


@jax.jit
def bf16_attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    return jax.nn.dot_product_attention(q, k, v, implementation="cudnn")


@jax.jit
def f32_attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    return jax.nn.dot_product_attention(q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32))


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
        kernel = jax.jit(lambda *a: fp8_kernel(*a)[0])
        row["fp8_kernel_ms"] = median_ms(kernel, q8, dq, k8, dk, v8, dv, repeats=args.repeats)
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
