"""Does XLA run `Fp8Linear` as an fp8 GEMM on this GPU? One (6144 x 4096) @ (4096 x 4096) linear per form,
its compiled HLO's GEMM calls and its median time against the bf16 matmul (issue #24).

    python benchmarks/probe_fp8_gemm.py [--tokens 6144 24576]

Forms: bf16 (`x @ w`); `Fp8Linear` (quantize x, dequantize both, dot: the pattern XLA's GEMM rewriter
turns into cuBLASLt fp8 with scales); a direct fp8 x fp8 `dot_general` with bf16 output, scales applied
after.
"""

import argparse
import re
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ltx_jax.model.quantization import FP8, Fp8Linear, per_tensor_scale, quantize_per_tensor, to_fp8


def direct(x: jax.Array, kernel: jax.Array, kernel_scale: jax.Array, out: jnp.dtype = jnp.bfloat16) -> jax.Array:
    scale = per_tensor_scale(x)
    y = jax.lax.dot_general(to_fp8(x, scale), kernel, (((2,), (0,)), ((), ())), preferred_element_type=out)
    return (y * (scale * kernel_scale).astype(out)).astype(x.dtype)


def per_row(x: jax.Array, kernel: jax.Array, kernel_scale: jax.Array) -> jax.Array:
    """One scale per token (its row's max |x| / 448), applied to the GEMM's output rows."""
    amax = jnp.max(jnp.abs(x), axis=-1, keepdims=True).astype(jnp.float32)
    scale = jnp.where(amax > 0, amax / 448.0, 1.0)
    q = jnp.clip(x.astype(jnp.float32) / scale, -448.0, 448.0).astype(FP8)
    y = jax.lax.dot_general(q, kernel, (((2,), (0,)), ((), ())), preferred_element_type=jnp.bfloat16)
    return (y.astype(jnp.float32) * (scale * kernel_scale)).astype(x.dtype)


def direct_prescaled(x: jax.Array, kernel: jax.Array, kernel_scale: jax.Array) -> jax.Array:
    """The input's scale from the previous call's amax would avoid the reduction pass; here a fixed one."""
    scale = jnp.float32(1.0 / 64)
    y = jax.lax.dot_general(to_fp8(x, scale), kernel, (((2,), (0,)), ((), ())), preferred_element_type=jnp.bfloat16)
    return y * (scale * kernel_scale).astype(jnp.bfloat16)


def median_ms(fn, *args: jax.Array, repeats: int = 20) -> float:  # noqa: ANN001
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times) * 1e3)


def gemm_calls(fn, *args: object) -> list[str]:  # noqa: ANN001
    text = fn.lower(*args).compile().as_text()
    calls = re.findall(r'custom_call_target="([^"]+)"', text)
    fp8_lines = sum(1 for line in text.splitlines() if "f8e4m3fn" in line and "custom-call" in line)
    return [*sorted(set(calls)), f"{fp8_lines} custom-call lines with f8e4m3fn"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, nargs="+", default=[6144, 24576])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    linear = nnx.Linear(4096, 4096, rngs=nnx.Rngs(0), param_dtype=jnp.bfloat16)
    fp8 = Fp8Linear.from_linear(linear)
    graphdef, state = nnx.split(fp8)
    kernel, kernel_scale = quantize_per_tensor(linear.kernel[...])
    assert kernel.dtype == FP8
    forms = {
        "bf16": jax.jit(lambda x, w: x @ w),
        "Fp8Linear": jax.jit(lambda x, s: nnx.merge(graphdef, s)(x)),
        "direct fp8 dot": jax.jit(direct),
        "direct f32 out": jax.jit(lambda x, k, s: direct(x, k, s, jnp.float32)),
        "no amax pass": jax.jit(direct_prescaled),
        "per-row scales": jax.jit(per_row),
    }
    print(jax.devices()[0].device_kind, jax.__version__)
    for tokens in args.tokens:
        x = jnp.asarray(rng.standard_normal((1, tokens, 4096)), jnp.bfloat16)
        fp8_inputs = (x, kernel, kernel_scale)
        inputs = {"bf16": (x, linear.kernel[...]), "Fp8Linear": (x, state), "direct fp8 dot": fp8_inputs,
                  "direct f32 out": fp8_inputs, "no amax pass": fp8_inputs, "per-row scales": fp8_inputs}  # fmt: skip
        base = None
        for name, fn in forms.items():
            ms = median_ms(fn, *inputs[name])
            base = base or ms
            print(
                f"{tokens:>6} tokens  {name:>15}: {ms:7.3f} ms ({ms / base:.3f}x bf16)  {gemm_calls(fn, *inputs[name])}"
            )


if __name__ == "__main__":
    main()
