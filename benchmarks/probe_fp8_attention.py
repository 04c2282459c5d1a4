"""cuDNN's fp8 flash attention (through JAX's `jax._src.cudnn.fused_attention_stablehlo`) against its bf16
one, at the DiT's self-attention shapes on one GPU: time, and where its error comes from (issue #24).

    python benchmarks/probe_fp8_attention.py --tokens 6144 24576 --heads 32 --repeats 20

fp8: q, k and v quantized to e4m3 with one scale each (max |x| / 448), the probabilities with 448 (they
lie in [0, 1]), the output with v's scale (an average of v's rows cannot exceed max |v|), then
dequantized to bf16: `ltx_jax.model.fp8_attention.Fp8Attention`, what `quantization="fp8"` runs. Reported
per token count: the median time of bf16 attention, of the fp8 kernel alone, and of `Fp8Attention` with
its quantize and dequantize passes; and for the first `--check-heads` heads, the error (relative L2, max
relative) against float32 attention of
- bf16 attention and `Fp8Attention` (the error a user sees),
- the fp8 kernel against float32 attention of its own rounded operands (what the kernel adds),
- the fp8 kernel with the output scaled by the `amax_o` it returned on a first call (the tightest output
  scale: whether v's bound costs anything),
- `emulated_fp8_attention`, the same roundings in XLA's float32 (what the CPU tests model).
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

from ltx_jax.model.attention_backends import xla_attention  # noqa: E402
from ltx_jax.model.fp8_attention import Fp8Attention, cudnn_fp8_attention, emulated_fp8_attention  # noqa: E402
from ltx_jax.model.quantization import FP8_MAX, per_tensor_scale, to_fp8  # noqa: E402


def quantize(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """`x` as e4m3 with one scale, and that scale (the descale cuDNN takes), shape (1, 1, 1, 1)."""
    scale = per_tensor_scale(x)
    return to_fp8(x, scale), jnp.reshape(scale, (1, 1, 1, 1))


def dequantized(q8: jax.Array, scale: jax.Array) -> jax.Array:
    return q8.astype(jnp.float32) * scale[0, 0]


@jax.jit
def fp8_attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """`Fp8Attention` on `(1, T, H, D)` operands."""
    heads = q.shape[2]
    merged = (x.reshape(*x.shape[:2], -1) for x in (q, k, v))
    return Fp8Attention(fallback=xla_attention)(*merged, heads=heads).reshape(q.shape)


@jax.jit
def kernel_with_scales(q8, dq, k8, dk, v8, dv, scale_o):  # noqa: ANN001, ANN201
    """The kernel with the output scale `scale_o` (descale 1 / scale_o): the output in float32, and amax_o."""
    one = jnp.ones((1, 1, 1, 1), jnp.float32)
    scales = {"descale_q": dq, "descale_k": dk, "descale_v": dv, "descale_s": one / FP8_MAX,
              "scale_s": one * FP8_MAX, "scale_o": scale_o}  # fmt: skip
    params = {name: scales.get(name, one) for name in cudnn_attention.fp8_params_keys}
    out, _, amax_o = cudnn_attention.dot_product_attention(
        q8, k8, v8, fp8_params=params, scale=q8.shape[-1] ** -0.5, use_fp8=True, qkv_layout="BTNH"
    )
    return out.astype(jnp.float32) / scale_o[0, 0], amax_o


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


def error_rows(q: jax.Array, k: jax.Array, v: jax.Array) -> dict[str, dict[str, float]]:
    (q8, dq), (k8, dk), (v8, dv) = quantize(q), quantize(k), quantize(v)
    expected = f32_attention(q, k, v)
    own_operands = f32_attention(dequantized(q8, dq), dequantized(k8, dk), dequantized(v8, dv))
    kernel = cudnn_fp8_attention(q8, dq, k8, dk, v8, dv).astype(jnp.float32) * dv[0, 0]
    _, amax_o = kernel_with_scales(q8, dq, k8, dk, v8, dv, 1.0 / dv)
    # amax_o is the output's maximum before the output scale (as cuDNN's fp8 recipes read it)
    tight, _ = kernel_with_scales(q8, dq, k8, dk, v8, dv, FP8_MAX / amax_o)
    emulated = emulated_fp8_attention(q8, dq, k8, dk, v8, dv).astype(jnp.float32) * dv[0, 0]
    return {
        "bf16_vs_f32": errors(bf16_attention(q, k, v), expected),
        "fp8_vs_f32": errors(fp8_attention(q, k, v), expected),
        "kernel_vs_f32_of_its_operands": errors(kernel, own_operands),
        "kernel_with_amax_o_scale_vs_f32": errors(tight, expected),
        "amax_o": float(amax_o.reshape(())),
        "max_v": float(dv.reshape(()) * FP8_MAX),
        "emulated_vs_f32_of_its_operands": errors(emulated, own_operands),
        "kernel_vs_emulated": errors(kernel, emulated),
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
        kernel = jax.jit(cudnn_fp8_attention)
        row["fp8_kernel_ms"] = median_ms(kernel, q8, dq, k8, dk, v8, dv, repeats=args.repeats)
        flops = 4 * tokens * tokens * args.heads * args.head_dim
        row["bf16_tflops"] = flops / row["bf16_ms"] / 1e9
        row["fp8_kernel_tflops"] = flops / row["fp8_kernel_ms"] / 1e9
        row["fp8_over_bf16"] = row["fp8_with_quantization_ms"] / row["bf16_ms"]
        row.update(error_rows(*(x[:, :, : args.check_heads] for x in (q, k, v))))
        print(json.dumps(row))


if __name__ == "__main__":
    main()
