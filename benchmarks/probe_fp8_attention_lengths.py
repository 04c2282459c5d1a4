"""Which sequence lengths cuDNN's fp8 flash attention takes (inference), for the sequence-parallel padding case.

    python benchmarks/probe_fp8_attention_lengths.py [--lengths 1000x1000 4296x4290] [--padded 24576x24573]

Sequence parallelism pads the video tokens to a multiple of the mesh size, and cuDNN's fp8 kernel takes no
key padding; dropping the pad keys instead gives lengths that are no multiple of 64 (and, where only the keys
are dropped, fewer keys than queries). Per `TQxTK`: whether the kernel compiles and runs, its error against
`emulated_fp8_attention` on the same rounded operands (relative L2; up to 8,192 x 8,192), and the time of
the kernel against bf16 cuDNN attention at those lengths (32 heads of 128). Per `--padded PADDEDxVALID`: the
time of a padded call as sequence parallelism makes it, `Fp8Attention` (which drops the pad tokens) against the
bf16 call with key lengths that ran before.
"""

import argparse

import jax
import jax.numpy as jnp
from probe_fp8_attention import errors, quantize  # beside this script
from probe_fp8_gemm import median_ms

from ltx_jax.model.attention_backends import cudnn_attention
from ltx_jax.model.fp8_attention import Fp8Attention, cudnn_fp8_attention, emulated_fp8_attention

HEADS, DIM = 32, 128
EMULATED_SCORES = 8192 * 8192  # query x key pairs up to which the emulation's float32 scores fit (32 heads: 8 GiB)


def operands(tokens_q: int, tokens_k: int) -> tuple[list[jax.Array], list[jax.Array]]:
    """Zero-mean normal q, k, v `(1, T, H*D)` in bf16 and their e4m3 forms with `(1, 1, 1, 1)` scales."""
    keys = jax.random.split(jax.random.key(0), 3)
    plain = [
        jax.random.normal(key, (1, t, HEADS * DIM), jnp.bfloat16)
        for key, t in zip(keys, (tokens_q, tokens_k, tokens_k), strict=True)
    ]
    fp8 = [part for x in plain for part in quantize(x.reshape(1, x.shape[1], HEADS, DIM))]
    return plain, fp8


def probe(tokens_q: int, tokens_k: int) -> str:
    plain, fp8 = operands(tokens_q, tokens_k)
    kernel = jax.jit(cudnn_fp8_attention)
    try:
        got = kernel(*fp8).astype(jnp.float32)
    except Exception as error:  # noqa: BLE001 - the probe reports what the kernel refuses
        return f"refused: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
    against = "vs emulation not run (its scores would not fit)"
    if tokens_q * tokens_k <= EMULATED_SCORES:
        emulated = jax.jit(emulated_fp8_attention)(*fp8).astype(jnp.float32)
        against = f"vs emulation {errors(got, emulated)['relative_l2']:.2e}"
    bf16 = jax.jit(lambda q, k, v: cudnn_attention(q, k, v, heads=HEADS))
    fp8_ms, bf16_ms = median_ms(kernel, *fp8), median_ms(bf16, *plain)
    return f"runs; {against}; fp8 kernel {fp8_ms:.3f} ms, bf16 {bf16_ms:.3f} ms ({fp8_ms / bf16_ms:.3f}x)"


def padded_call(padded: int, valid: int) -> str:
    """A padded call as Ulysses makes it (the whole sequence, key lengths): `Fp8Attention` with `valid_tokens`
    (its centering and quantize passes included) against the bf16 cuDNN call with key lengths it replaces."""
    plain, _ = operands(padded, padded)
    lengths = jnp.full((1,), valid, jnp.int32)
    fp8 = jax.jit(
        lambda q, k, v: Fp8Attention(cudnn_attention, valid_tokens=valid)(
            q, k, v, heads=HEADS, key_value_seq_lengths=lengths
        )
    )
    bf16 = jax.jit(lambda q, k, v: cudnn_attention(q, k, v, heads=HEADS, key_value_seq_lengths=lengths))
    fp8_ms, bf16_ms = median_ms(fp8, *plain), median_ms(bf16, *plain)
    return f"Fp8Attention {fp8_ms:.3f} ms, bf16 with key lengths {bf16_ms:.3f} ms ({fp8_ms / bf16_ms:.3f}x)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", nargs="+", default=["1000x1000", "1024x1000", "4290x4290", "4296x4290"])
    parser.add_argument("--padded", nargs="*", default=["4296x4290"], help="PADDEDxVALID: a padded call's times")
    args = parser.parse_args()
    print(jax.devices()[0].device_kind, jax.__version__)
    for pair in args.lengths:
        tokens_q, tokens_k = (int(n) for n in pair.split("x"))
        print(f"{tokens_q:>6} queries x {tokens_k:>6} keys: {probe(tokens_q, tokens_k)}", flush=True)
    for pair in args.padded:
        padded, valid = (int(n) for n in pair.split("x"))
        print(f"{valid:>6} of {padded:>6} tokens, padded: {padded_call(padded, valid)}", flush=True)


if __name__ == "__main__":
    main()
