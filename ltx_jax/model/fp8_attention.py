"""Video self-attention in fp8 under `quantization="fp8"`: cuDNN's fp8 flash attention on Hopper.

`quantize_fp8` marks the video self-attention (`attn1`) of every block whose linears it turns fp8; the
block then asks its `AttentionOps` for the fp8 function of that module, which is `Fp8Attention` around
the model's own backend (sequence parallelism wraps it as it wraps that backend: the exchange moves
bf16, and the fp8 attention runs on the gathered sequence).

What one call computes, per sample of the batch (a sample's result never depends on what is batched
beside it, e.g. the other guidance passes):
- k and v centered over the tokens (exact; see `Fp8Attention.__call__`). Without it the DiT's keys and
  values round badly: their common part sets max |x|, and the deviations that decide the attention land
  in e4m3's coarse steps (the velocity moved by 2.2e-1 instead of 5.4e-2: docs/quantization.md).
- q, k and v rounded to e4m3, each with one scale, max |x| / 448 over the sample's tensor (under
  sequence parallelism, over every device's part of it: the scales one device would use).
- S = q k^T / sqrt(D) accumulated in float32; P = exp(S - max) in [0, 1], rounded to e4m3 with scale
  1/448; O = P v / sum(P).
- O rounded to e4m3 with v's scale times `OUTPUT_HEADROOM`, which cannot overflow: each row of O is a
  convex combination of v's rows, so |O| <= max |v|, and rounding the weights (up by at most 2^-4 each)
  while summing them unrounded can raise that by 2^-4. (A smaller scale from O's own maximum would need O
  first; at the DiT's self-attention shapes it changed nothing measurable: benchmarks/probe_fp8_attention.py.)
- O dequantized, v's mean added, in the activations' dtype.

Where it runs: on a GPU from Hopper on (compute capability 9.0), with bf16/fp16 activations, a head dim
that is a multiple of 16 up to 256, and no mask or key padding (cuDNN's fp8 kernel takes neither);
elsewhere on a GPU the call goes to the model's bf16 backend. Sequence parallelism's padding is the
exception where there is no mask: it knows its real token count (`valid_tokens`), and the pad keys and
values are dropped before the kernel, which took every length probed
(benchmarks/probe_fp8_attention_lengths.py). On the CPU the same steps run in XLA (`emulated_fp8_attention`:
scores materialized, any float dtype), so tests see fp8's rounding; the kernel's own order of work puts it
3.7e-2 (relative L2) from that emulation at the probe's shapes. Other platforms run the bf16 backend. A call
that runs in bf16 warns why (a logging WARNING, shown without any logging set up), once per reason in a
process: the user asked for fp8 and should see where it did not apply.

The cuDNN kernel is reached through JAX's private `jax._src.cudnn.fused_attention_stablehlo` (the
public `jax.nn.dot_product_attention` has no fp8 path), as `attention_backends` does for the
log-sum-exp.
"""

from __future__ import annotations

import dataclasses
import logging

import jax
import jax.numpy as jnp
from jax._src.cudnn import fused_attention_stablehlo as cudnn_fmha

from ltx_jax.model.attention_backends import LocalAttentionFn, cudnn_kernel_unsupported, merge_heads, split_heads
from ltx_jax.model.quantization import FP8_MAX, scale_of_amax, to_fp8

logger = logging.getLogger(__name__)

_UNIT = (1, 1, 1, 1)  # cuDNN's scales are float32 tensors of this shape
# The output's scale over v's: the weights are rounded (each up by at most 2^-4) before they multiply v but
# summed unrounded, so |O| can exceed max |v| by that much.
OUTPUT_HEADROOM = 1 + 2**-4
_logged_reasons: set[str] = set()


def fp8_attention_unsupported(
    q: jax.Array, heads: int, mask: jax.Array | None, key_value_seq_lengths: jax.Array | None
) -> str | None:
    """None if this call runs in fp8 (cuDNN on a GPU, emulated on the CPU), else why it runs in bf16."""
    if mask is not None or key_value_seq_lengths is not None:
        return "cuDNN's fp8 attention takes no mask and no key padding"
    head_dim = q.shape[-1] // heads
    if head_dim % 16 or head_dim > 256:
        return f"cuDNN's fp8 attention needs a head dim that is a multiple of 16 up to 256, got {head_dim}"
    if jax.default_backend() == "cpu":
        return None  # emulated
    if jax.default_backend() != "gpu":
        return f"fp8 attention runs on a GPU (cuDNN) or emulated on the CPU, not on {jax.default_backend()!r}"
    reason = cudnn_kernel_unsupported(q.dtype, head_dim)  # what every cuDNN attention call needs
    if reason is not None:
        return f"cuDNN's fp8 attention: {reason}"
    if not cudnn_fmha.check_compute_capability("9.0"):
        return "cuDNN's fp8 attention needs a GPU of compute capability 9.0 (Hopper) or later"
    return None


def cudnn_fp8_attention(
    q8: jax.Array, q_scale: jax.Array, k8: jax.Array, k_scale: jax.Array, v8: jax.Array, v_scale: jax.Array
) -> jax.Array:
    """cuDNN's fp8 flash attention on `(1, T, H, D)` e4m3 operands and their `(1, 1, 1, 1)` float32 scales
    -> e4m3 output in units of `v_scale * OUTPUT_HEADROOM` (see the module docstring)."""
    one = jnp.ones(_UNIT, jnp.float32)
    scales = {
        "descale_q": q_scale, "descale_k": k_scale, "descale_v": v_scale,
        "descale_s": one / FP8_MAX, "scale_s": one * FP8_MAX, "scale_o": 1.0 / (v_scale * OUTPUT_HEADROOM),
    }  # fmt: skip
    params = {name: scales.get(name, one) for name in cudnn_fmha.fp8_params_keys}
    out, _, _ = cudnn_fmha.dot_product_attention(
        q8, k8, v8, fp8_params=params, scale=q8.shape[-1] ** -0.5, use_fp8=True, qkv_layout="BTNH"
    )
    return out


def emulated_fp8_attention(
    q8: jax.Array, q_scale: jax.Array, k8: jax.Array, k_scale: jax.Array, v8: jax.Array, v_scale: jax.Array
) -> jax.Array:
    """`cudnn_fp8_attention`'s steps in XLA with the scores materialized (float32 arithmetic on the e4m3
    values): the CPU's fp8 attention."""
    scores = jnp.einsum("bqhd,bkhd->bhqk", q8.astype(jnp.float32), k8.astype(jnp.float32))
    scores = scores * (q_scale * k_scale)[0, 0] * q8.shape[-1] ** -0.5
    weights = jnp.exp(scores - scores.max(axis=-1, keepdims=True))
    total = weights.sum(axis=-1)  # (B, H, Tq), from the unrounded weights
    rounded = to_fp8(weights, jnp.float32(1 / FP8_MAX)).astype(jnp.float32) / FP8_MAX
    out = jnp.einsum("bhqk,bkhd->bqhd", rounded, v8.astype(jnp.float32)) * v_scale[0, 0]
    out = out / jnp.moveaxis(total, 1, 2)[..., None]
    return to_fp8(out, v_scale[0, 0] * OUTPUT_HEADROOM)


@dataclasses.dataclass(frozen=True)
class Fp8Attention:
    """A `LocalAttentionFn`: fp8 attention where `fp8_attention_unsupported` finds nothing against the
    call, `fallback` (the model's backend) elsewhere.

    `axis_name`: inside `shard_map`, the mesh axis the sequence is split over. Each scale is then the
    maximum over that axis too (one all-reduce of three numbers a sample), so every device quantizes
    with the scales one device would use, whatever part of the heads or tokens it holds.

    `valid_tokens`: the real token count of a sequence that sequence parallelism padded (to a multiple of
    the mesh size). A call with key lengths and no mask then drops the pad keys and values
    (`_without_padding`) and runs in fp8, taking the lengths to be `valid_tokens` for every sample (as
    sequence parallelism passes them; their values are not read); without it such a call goes to `fallback`.
    """

    fallback: LocalAttentionFn
    axis_name: str | tuple[str, ...] | None = None
    valid_tokens: int | None = None

    def __call__(
        self,
        q: jax.Array,
        k: jax.Array,
        v: jax.Array,
        *,
        heads: int,
        mask: jax.Array | None = None,
        key_value_seq_lengths: jax.Array | None = None,
    ) -> jax.Array:
        """`(B, Tq, H*D)` queries, `(B, Tk, H*D)` keys and values -> `(B, Tq, H*D)` in q's dtype."""
        if key_value_seq_lengths is not None and self.valid_tokens is not None and mask is None:
            return self._without_padding(q, k, v, heads=heads)
        reason = fp8_attention_unsupported(q, heads, mask, key_value_seq_lengths)
        if reason is not None:
            if reason not in _logged_reasons:  # at trace time: once per reason, not per call
                _logged_reasons.add(reason)
                logger.warning("fp8 attention: this call runs in bf16: %s", reason)
            return self.fallback(q, k, v, heads=heads, mask=mask, key_value_seq_lengths=key_value_seq_lengths)
        kernel = cudnn_fp8_attention if jax.default_backend() == "gpu" else emulated_fp8_attention
        # Centered over the keys (exact: a row's scores all shift by q.mean(k); each row of the output is a
        # convex combination of v's rows, so v's mean comes back whole): fp8 then rounds the deviations.
        dtype = q.dtype
        k_mean, v_mean = (jnp.mean(x.astype(jnp.float32), axis=1, keepdims=True) for x in (k, v))
        q, k, v = q.astype(jnp.float32), k.astype(jnp.float32) - k_mean, v.astype(jnp.float32) - v_mean
        scales = self._scales(q, k, v)  # (B, 3)
        samples = []
        for b in range(q.shape[0]):  # one call per sample: its scales are its own
            operands = []
            for i, x in enumerate((q, k, v)):
                operands += [to_fp8(split_heads(x[b : b + 1], heads), scales[b, i]), jnp.reshape(scales[b, i], _UNIT)]
            out = merge_heads(kernel(*operands).astype(jnp.float32))
            samples.append(out * (scales[b, 2] * OUTPUT_HEADROOM))
        return (jnp.concatenate(samples) + v_mean).astype(dtype)

    def _without_padding(self, q: jax.Array, k: jax.Array, v: jax.Array, *, heads: int) -> jax.Array:
        """Sequence parallelism's padded sequence, its pad tokens last: the pad keys and values are dropped
        (the kernel takes no key padding), and the pad queries kept out of q's scale, so every scale is the
        one a device holding only the real tokens would use.

        `k`, `v` `(B, T_padded, H*D)`. `q` is either the whole sequence (Ulysses: `(B, T_padded, H*D)`, its pad
        rows dropped and their output zero) or this device's contiguous block of it (all-gathered keys: the
        rows past `valid_tokens` zeroed). A pad token's output is never read by a real token (pad keys are
        dropped or excluded by length everywhere) and is cut when the sequence is gathered at the end.
        """
        valid, padded = self.valid_tokens, k.shape[1]
        k, v = k[:, :valid], v[:, :valid]
        if q.shape[1] == padded:
            return jnp.pad(self(q[:, :valid], k, v, heads=heads), ((0, 0), (0, padded - valid), (0, 0)))
        if self.axis_name is None:
            raise ValueError(
                f"Fp8Attention got {q.shape[1]} queries for {padded} padded keys but no axis_name: a block of "
                "the queries needs the mesh axis it was split over to know which rows are padding. Pass "
                "axis_name (SequenceParallel passes its mesh axes)."
            )
        first = jax.lax.axis_index(self.axis_name) * q.shape[1]
        real = (first + jnp.arange(q.shape[1]) < valid)[None, :, None]
        return self(jnp.where(real, q, jnp.zeros((), q.dtype)), k, v, heads=heads)

    def _scales(self, q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        """`(B, 3)` float32: each sample's max |x| / 448 of q, k and v (float32; over `axis_name` too)."""
        amax = jnp.stack([jnp.max(jnp.abs(x), axis=(1, 2)) for x in (q, k, v)], axis=-1)
        if self.axis_name is not None:
            amax = jax.lax.pmax(amax, self.axis_name)
        return scale_of_amax(amax)
