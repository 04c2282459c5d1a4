"""fp8 for the DiT: "fp8-cast" stores weights in float8_e4m3fn; "fp8" also multiplies in it.

fp8-cast: the transformer blocks' linear weights stored in float8_e4m3fn, upcast inside each matmul.

Source: `ltx_core/quantization/fp8_cast.py` (`QuantizationPolicy.fp8_cast()`, ltx-pipelines'
`--quantization fp8-cast`): the weights and biases of every `transformer_blocks.*` linear named
`to_q`, `to_k`, `to_v`, `to_out.0`, `ff.net.0.proj` or `ff.net.2` (video and audio attention, the
cross-modal attentions, both feed-forwards) are cast to float8_e4m3fn as they are loaded (a plain
round-to-nearest cast, no scale, as the reference's `_naive_weight_or_bias_downcast`), and each of
those linears upcasts them to the activations' dtype before its matmul (`UPCAST_DURING_INFERENCE`).
Everything else (norms, AdaLN tables, embeddings, the gated-attention logits, the output head) stays
in the model dtype. It halves the blocks' weight memory; the matmuls still run in bf16.

fp8: Hopper's fp8 matmuls. Source: `ltx_core/quantization/fp8_scaled_mm.py` (`QuantizationPolicy.
fp8_scaled_mm()`, which needs TensorRT-LLM): every linear of the transformer blocks but blocks 0 and
43-47 of LTX-2's 48 (its `EXCLUDED_LAYER_SUBSTRINGS`; the layers outside the blocks stay too) becomes an
`Fp8Linear`: its weight in float8_e4m3fn with a per-tensor float32 scale (max |w| / 448, as
`quantize_weight_to_fp8_per_tensor`), its input quantized on each call. The reference reads a static
per-tensor input scale from a pre-quantized checkpoint (`input_scale`); so does `Fp8Linear` where the
checkpoint has one or `calibrate_input_scales` measured it: no max |x| pass, and the quantize fuses into
the op before. A bf16 checkpoint has none, so each token's scale is its own max |x| / 448 (dynamic). Per
token, not per tensor: a tensor's scale would depend on
the other guidance passes batched with it and, under sequence parallelism, on how the tokens are split
(or cost an all-reduce per linear); a token's scale factors out of its row of the product, so the GEMM
still takes fp8 operands. Products accumulate in float32 and come back in bf16, then are multiplied by
the two scales in float32; norms, AdaLN and RoPE stay in bf16, and so does attention but the video
self-attention of the same blocks (`ltx_jax.model.fp8_attention`). The dot takes the fp8 operands
themselves: XLA runs it as a cuBLASLt fp8 GEMM (`__cublas$lt$matmul$f8`). The dequantize -> bf16 dot
pattern that XLA's GEMM rewriter was written for is not rewritten by jax 0.11.2's XLA (it dequantizes
and runs a bf16 GEMM, measured 1.1-1.7x slower than plain bf16: `benchmarks/probe_fp8_gemm.py`). Other
backends compute the same products in float32.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ltx_jax.devices import cuda_compute_capability

Quantization = Literal["none", "fp8-cast", "fp8"]
QUANTIZATIONS: tuple[Quantization, ...] = ("none", "fp8-cast", "fp8")
FP8 = jnp.float8_e4m3fn
FP8_MAX = float(jnp.finfo(FP8).max)  # 448
# ltx-core's fp8_scaled_mm keeps these transformer blocks in bf16 (most sensitive to quantization).
FP8_EXCLUDED_BLOCKS = (0, 43, 44, 45, 46, 47)
FP8_TENSOR_CORES = (8, 9)  # the compute capability from which GPUs multiply in fp8 (Ada, Hopper and later)
_BLOCKS = "transformer_blocks."
_TARGET_MODULES = (".to_q", ".to_k", ".to_v", ".to_out.0", "ff.net.0.proj", "ff.net.2")
logger = logging.getLogger(__name__)


def check_quantization(quantization: str) -> None:
    """Raises `ValueError` naming the choices for anything but "none", "fp8-cast" and "fp8"."""
    if quantization not in QUANTIZATIONS:
        raise ValueError(f"quantization must be one of {list(QUANTIZATIONS)}, got {quantization!r}.")


def is_fp8_cast_key(key: str) -> bool:
    """Whether the checkpoint key (`transformer_blocks.3.attn1.to_q.weight`) is stored in fp8 under fp8-cast:
    the reference's `TRANSFORMER_LINEAR_DOWNCAST_MAP` (prefix `transformer_blocks.`, these module suffixes)."""
    module, _, leaf = key.rpartition(".")
    return key.startswith(_BLOCKS) and leaf in ("weight", "bias") and module.endswith(_TARGET_MODULES)


def quantize_fp8_cast(model: nnx.Module, keys: Iterable[tuple[str, tuple]], compute_dtype: jnp.dtype) -> nnx.Module:
    """`model` (in place) with the parameters at the paths of the fp8-cast `keys` (checkpoint key,
    parameter path) cast to float8_e4m3fn (a no-op where they already are), and their linears set to
    compute in `compute_dtype` (they upcast the weights to it: nnx.Linear promotes its operands to
    its `dtype`)."""
    for key, path in keys:
        if not is_fp8_cast_key(key):
            continue
        linear = _module_at(model, path[:-1])
        if not isinstance(linear, nnx.Linear):
            raise TypeError(f"fp8-cast targets {key}, which is not a linear layer's parameter here.")
        linear.dtype = compute_dtype
        variable = getattr(linear, path[-1])
        variable.set_value(variable.get_value().astype(FP8))
    return model


def _module_at(model: nnx.Module, path: tuple) -> object:
    node = model
    for part in path:
        node = node[int(part)] if isinstance(part, int) or str(part).isdigit() else getattr(node, part)
    return node


def per_tensor_scale(x: jax.Array) -> jax.Array:
    """max |x| / 448 as a float32 scalar (1 for an all-zero tensor): x / scale fills e4m3's range."""
    return scale_of_amax(jnp.max(jnp.abs(x.astype(jnp.float32))))


def scale_of_amax(amax: jax.Array) -> jax.Array:
    """The per-tensor scale of a tensor whose largest magnitude is `amax` (float32): amax / 448, or 1."""
    return jnp.where(amax > 0, amax / FP8_MAX, 1.0).astype(jnp.float32)


def to_fp8(x: jax.Array, scale: jax.Array) -> jax.Array:
    """x / scale, clipped to e4m3's range, rounded to float8_e4m3fn."""
    return jnp.clip(x.astype(jnp.float32) / scale, -FP8_MAX, FP8_MAX).astype(FP8)


def from_fp8(q: jax.Array, scale: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """The dequantized values q * scale, computed in float32, in `dtype`."""
    return (q.astype(jnp.float32) * scale).astype(dtype)


def per_row_scale(x: jax.Array) -> jax.Array:
    """max |x| / 448 over the last axis, (..., 1) float32 (1 for an all-zero row): one scale per token."""
    amax = jnp.max(jnp.abs(x), axis=-1, keepdims=True).astype(jnp.float32)
    return jnp.where(amax > 0, amax / FP8_MAX, 1.0)


@jax.jit
def quantize_per_tensor(kernel: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(float8_e4m3fn values, float32 scale) with kernel ~= values * scale (ltx-core's
    `quantize_weight_to_fp8_per_tensor`, without its transpose: our kernels are (in, out) already)."""
    scale = per_tensor_scale(kernel)
    return to_fp8(kernel, scale), scale


class Fp8InputAmax(nnx.Variable):
    """The largest |x| an `Fp8Linear` has been called with while `calibrate_input_scales` watched it."""


class Fp8Linear(nnx.Module):
    """`x @ kernel + bias` with the kernel (in, out) stored in float8_e4m3fn times `kernel_scale`, and
    x quantized per call: with `input_scale` (a float32 scalar) by that static scale, as ltx-core's
    fp8_scaled_mm does with a pre-quantized checkpoint's `input_scale`; without it each token by its own
    scale (dynamic). See the module docstring."""

    def __init__(
        self,
        kernel: jax.Array,
        kernel_scale: jax.Array,
        bias: jax.Array | None,
        input_scale: jax.Array | None = None,
    ) -> None:
        self.kernel = nnx.Param(kernel)
        self.kernel_scale = nnx.Param(kernel_scale)
        self.bias = None if bias is None else nnx.Param(bias)
        # data attributes even while None: `calibrate_input_scales` sets and clears both
        self.input_scale = nnx.data(None if input_scale is None else nnx.Param(jnp.asarray(input_scale, jnp.float32)))
        self.input_amax: Fp8InputAmax | None = nnx.data(None)  # set while `calibrate_input_scales` runs

    @classmethod
    def from_linear(cls, linear: nnx.Linear, input_scale: jax.Array | None = None) -> Fp8Linear:
        """The linear's kernel quantized per tensor (`quantize_weight_to_fp8_per_tensor`), its bias kept."""
        bias = None if linear.bias is None else linear.bias[...]
        return cls(*quantize_per_tensor(linear.kernel[...]), bias, input_scale)

    def __call__(self, x: jax.Array) -> jax.Array:
        if self.input_amax is not None:
            amax = jnp.max(jnp.abs(x)).astype(jnp.float32)
            self.input_amax.set_value(jnp.maximum(self.input_amax.get_value(), amax))
        # A static scale skips the max |x| pass, and the quantize fuses into the op producing x; a token's
        # own scale factors out of its row of the product.
        scale = per_row_scale(x) if self.input_scale is None else self.input_scale[...]
        out = jnp.bfloat16 if x.dtype == jnp.bfloat16 else jnp.float32
        y = jax.lax.dot_general(
            to_fp8(x, scale), self.kernel[...], (((x.ndim - 1,), (0,)), ((), ())), preferred_element_type=out
        )
        y = (y.astype(jnp.float32) * (scale * self.kernel_scale[...])).astype(x.dtype)
        return y if self.bias is None else y + self.bias[...].astype(x.dtype)


def fp8_targets(model: nnx.Module) -> list[tuple[tuple[Any, ...], nnx.Module, str, nnx.Linear]]:
    """(kernel parameter path, parent module, attribute, linear) of every linear `quantize_fp8` replaces:
    all of each transformer block's `nnx.Linear`s outside `FP8_EXCLUDED_BLOCKS`."""
    targets = []
    for index, block in enumerate(model.transformer_blocks):
        if index in FP8_EXCLUDED_BLOCKS:
            continue
        for path, module in nnx.iter_modules(block):
            if isinstance(module, nnx.Linear):
                kernel_path = ("transformer_blocks", index, *path, "kernel")
                targets.append((kernel_path, _module_at(block, path[:-1]), path[-1], module))
    return targets


def fp8_matmuls_upcast() -> str | None:
    """Why this machine's GPU cannot multiply in fp8 (its compute capability is below `FP8_TENSOR_CORES`, so
    XLA upcasts the fp8 operands and multiplies in a wider type), or None: it can, or no CUDA GPU runs the model."""
    capability = cuda_compute_capability()
    if capability is None or capability >= FP8_TENSOR_CORES:
        return None
    return (
        f"{jax.local_devices()[0].device_kind} (compute capability {capability[0]}.{capability[1]}) has no fp8 "
        "tensor cores: quantization='fp8' runs its matmuls on upcast operands, which saves no time over bf16. "
        "quantization='fp8-cast' halves the same weights' memory."
    )


def quantize_fp8(
    model: nnx.Module,
    scales: Mapping[tuple[Any, ...], jax.Array] | None = None,
    *,
    attention: bool = True,
    input_scales: Mapping[tuple[Any, ...], jax.Array] | None = None,
) -> nnx.Module:
    """`model` (an `LTXModel`, in place) with every linear of `fp8_targets` replaced by an `Fp8Linear`,
    and with `attention` the video self-attention of the same blocks marked fp8 (`ltx_jax.model.fp8_attention`).

    A linear whose kernel is still in the model dtype is quantized from it (the bf16 kernel is freed once
    replaced). One whose kernel is already float8_e4m3fn (quantized by the loader as it was placed) keeps
    it, with its scale from `scales` (kernel parameter path -> float32 scale). A kernel path in
    `input_scales` gets that static input scale (an fp8 checkpoint's `input_scale`); the others quantize
    their inputs per token."""
    input_scales = {} if input_scales is None else input_scales
    if (reason := fp8_matmuls_upcast()) is not None:
        logger.warning("quantize_fp8: %s", reason)
    for index, block in enumerate(model.transformer_blocks if model.cfg.has_video else ()):  # audio-only: no attn1
        block.attn1.fp8 = attention and index not in FP8_EXCLUDED_BLOCKS
    for kernel_path, parent, name, linear in fp8_targets(model):
        kernel, input_scale = linear.kernel[...], input_scales.get(kernel_path)
        if kernel.dtype == FP8:
            if scales is None or kernel_path not in scales:
                raise ValueError(f"quantize_fp8: the fp8 kernel at {kernel_path} comes without its scale.")
            bias = None if linear.bias is None else linear.bias[...]
            replacement = Fp8Linear(kernel, scales[kernel_path], bias, input_scale)
        else:
            replacement = Fp8Linear.from_linear(linear, input_scale)
        if isinstance(parent, nnx.List):
            parent[int(name)] = replacement
        else:
            setattr(parent, name, replacement)
    return share_equal_input_scales(model)


# The linears of each attention that always read one tensor: q and the gate logits read x, k and v the context,
# which in a self-attention is x.
_SELF_ATTENTIONS = ("attn1", "audio_attn1")
_CROSS_ATTENTIONS = ("attn2", "audio_attn2", "audio_to_video_attn", "video_to_audio_attn")


def _same_input_groups(attention: str) -> tuple[tuple[str, ...], ...]:
    if attention in _SELF_ATTENTIONS:
        return (("to_q", "to_k", "to_v", "to_gate_logits"),)
    return (("to_q", "to_gate_logits"), ("to_k", "to_v"))


def share_equal_input_scales(model: nnx.Module) -> nnx.Module:
    """`model` (in place) with the `Fp8Linear`s that read one tensor (`_same_input_groups`) holding one scale
    parameter where their static input scales are equal, as calibration makes them. The values do not change;
    XLA then sees one scale, quantizes the tensor once, and merges the group's GEMMs as it does with per-token
    scales. Which linears may share is fixed by the model's structure, not by coincidences of value, so blocks
    calibrated alike stay one program for `ltx_jax.parallel.block_programs`."""
    for block in model.transformer_blocks:
        for name in (*_SELF_ATTENTIONS, *_CROSS_ATTENTIONS):
            attention = getattr(block, name, None)
            for group in _same_input_groups(name) if attention is not None else ():
                linears = [getattr(attention, member, None) for member in group]
                static = [m for m in linears if isinstance(m, Fp8Linear) and m.input_scale is not None]
                values = {float(np.asarray(m.input_scale.get_value().addressable_data(0))) for m in static}
                if len(static) > 1 and len(values) == 1:
                    for linear in static[1:]:
                        linear.input_scale = static[0].input_scale
    return model


def calibrate_input_scales(model: nnx.Module, run: Callable[[nnx.Module], object]) -> dict[tuple[Any, ...], float]:
    """Static input scales for an fp8 `model` (after `quantize_fp8`), set in place and returned (kernel path
    -> scale): each `Fp8Linear`'s largest |x| over what `run(model)` feeds it, / 448.

    `run` calls the model on calibration inputs, eagerly or under `nnx.jit` (which carries the recorded
    maxima back; a plain `jax.jit` of a split model would drop them), on one device: under sequence
    parallelism each device would see only its tokens. A linear already holding a static scale is
    recalibrated from the dynamic one; one that `run` never reaches stays dynamic and is left out of the
    result. If `run` raises, or reaches no fp8 linear (a `ValueError`: it ran a copy), the model keeps the
    scales it had. Inputs beyond the calibrated range are clipped to e4m3's 448 later, so calibrate on inputs like
    those the model will get (every sigma of the schedule, each guidance pass).
    """
    linears = {path: module for path, module in nnx.iter_modules(model) if isinstance(module, Fp8Linear)}
    if not linears:
        raise ValueError("calibrate_input_scales: the model has no fp8 linears; run quantize_fp8(model) first.")
    amaxes = _record_input_maxima(model, linears, run)
    scales = {}
    for path, linear in linears.items():
        if amaxes[path] < 0:  # `run` never reached it (e.g. a perturbed pass's skipped q/k): it stays dynamic
            linear.input_scale = None
            continue
        scale = scale_of_amax(jnp.asarray(amaxes[path], jnp.float32))
        linear.input_scale = nnx.Param(scale)
        scales[(*path, "kernel")] = float(scale)
    share_equal_input_scales(model)
    return scales


def _record_input_maxima(
    model: nnx.Module, linears: Mapping[Any, Fp8Linear], run: Callable[[nnx.Module], object]
) -> dict[Any, float]:
    """Each linear's largest input over `run(model)` (-1 where it was not called), the linears quantizing per
    token meanwhile. If `run` fails or records nothing, they keep the input scales they had."""
    previous = {path: linear.input_scale for path, linear in linears.items()}
    for linear in linears.values():
        linear.input_scale = None
        linear.input_amax = Fp8InputAmax(jnp.full((), -1.0, jnp.float32))  # -1: not called yet
    try:
        run(model)
        amaxes = {path: float(linear.input_amax.get_value()) for path, linear in linears.items()}
    except BaseException:
        _restore(linears, previous)
        raise
    finally:
        for linear in linears.values():
            linear.input_amax = None
    if max(amaxes.values()) < 0:
        _restore(linears, previous)
        raise ValueError(
            "calibrate_input_scales: run(model) reached no fp8 linear, or ran a copy of the model: call the model "
            "itself, eagerly or under nnx.jit (not jax.jit of a split model, SequenceParallel or a pipeline)."
        )
    return amaxes


def _restore(linears: Mapping[Any, Fp8Linear], scales: Mapping[Any, nnx.Param | None]) -> None:
    for path, linear in linears.items():
        linear.input_scale = scales[path]
