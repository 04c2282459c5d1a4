"""Why cuDNN's fp8 attention looked 13-18% off in benchmarks/probe_fp8_attention.py: that probe's inputs, taken
apart on the CPU (issue #24; docs/quantization.md, "Where the kernel's error comes from").

    python benchmarks/fp8_rounding_bias.py --tokens 6144

The probe's q, k, v (`jax.random.normal` in bf16, key = the token count, its first 2 of 32 heads): float32
attention with each of them rounded to e4m3 alone (per-tensor scale, max |x| / 448), against float32 attention
of the originals (relative L2); how many distinct values v holds and its range; the mean over the tokens of v's
rounding error (RMS over the channels) against what independent errors would give (their standard deviation
over sqrt(tokens)); and the size of the output against v's.
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from ltx_jax.model.quantization import per_tensor_scale, to_fp8


def attention(q: jax.Array, k: jax.Array, v: jax.Array) -> np.ndarray:
    return np.asarray(jax.nn.dot_product_attention(*(x.astype(jnp.float32) for x in (q, k, v))))


def rounded(x: jax.Array) -> jax.Array:
    scale = per_tensor_scale(x)
    return to_fp8(x, scale).astype(jnp.float32) * scale


def relative_l2(ours: np.ndarray, reference: np.ndarray) -> float:
    return float(np.linalg.norm(ours - reference) / np.linalg.norm(reference))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=6144)
    args = parser.parse_args()
    keys = jax.random.split(jax.random.key(args.tokens), 3)
    q, k, v = (jax.random.normal(key, (1, args.tokens, 32, 128), jnp.bfloat16)[:, :, :2] for key in keys)
    expected = attention(q, k, v)
    print(f"{args.tokens} tokens, 2 heads of 128; attention with one operand rounded to e4m3, relative L2:")
    errors = {
        "q": attention(rounded(q), k, v),
        "k": attention(q, rounded(k), v),
        "v": attention(q, k, rounded(v)),
    }
    print("  " + "  ".join(f"{name} {relative_l2(out, expected):.3e}" for name, out in errors.items()))
    values = np.asarray(v, np.float32)
    low, high = values.min(), values.max()
    print(f"v: {len(np.unique(values))} distinct values from {low:.3f} to {high:.3f}, mean {values.mean():.2e}")
    error = np.asarray(rounded(v)) - values
    over_tokens = float(np.sqrt((error.mean(axis=1) ** 2).mean()))
    independent = float(error.std() / np.sqrt(args.tokens))
    print(f"v's rounding error, mean over the tokens (RMS over channels): {over_tokens:.2e}; independent errors would "
          f"give {independent:.2e} ({over_tokens / independent:.1f}x)")  # fmt: skip
    print(f"output std {expected.std():.3e}, v std {values.std():.3e}")


if __name__ == "__main__":
    main()
