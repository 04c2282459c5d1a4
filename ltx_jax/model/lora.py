"""A LoRA applied while the DiT runs, sharing the base model's weights instead of fusing a second copy.

Source: ltx-core's `loader/fuse_loras.py` (`apply_loras`), which builds a new state dict with
`W + strength * B @ A` for every LoRA-targeted weight. ltx-pipelines' two-stage flow builds its
stage-2 DiT that way, a second 38 GB copy of the weights. Here `with_lora` returns a DiT whose
transformer blocks add their LoRA deltas to their own weights right when each block runs
(`LoraBlock`), rounded as `apply_loras` rounds them, so the DiT with and without the LoRA share one
copy of the base weights and one block's fused weights are live at a time. Each forward pays one
`B @ A` product per targeted weight (2 x out x in x rank FLOPs; about 1% of a stage-2 forward of
LTX-2.3 with the rank-384 distilled LoRA).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
from flax import nnx
from jax import lax

from ltx_jax.model.quantization import from_fp8, quantize_per_tensor

ParamPath = tuple  # an nnx parameter path, e.g. ("transformer_blocks", 3, "attn1", "to_q", "kernel")


class LoraFactor(nnx.Variable):
    """`lora_A` `(rank, in)` or `lora_B` `(out, rank)`, in the LoRA file's layout and dtype. Not an
    `nnx.Param`: state-dict tables and loaders see the base model's parameters only."""


@dataclasses.dataclass(frozen=True)
class LoraWeights:
    """One LoRA for a model: each targeted `nnx.Linear` kernel's path -> its `(A, B)`, and the strength.

    A kernel is `(in, out)` (JAX layout); its `A` is `(rank, in)` and `B` `(out, rank)`, as ltx-core stores them.
    """

    factors: Mapping[ParamPath, tuple[jax.Array, jax.Array]]
    strength: float = 1.0


def fused_kernel(kernel: jax.Array, a: jax.Array, b: jax.Array, strength: float) -> jax.Array:
    """`kernel + (strength * B @ A).T`, rounded the way ltx-core's `apply_loras` rounds it (and the
    loader's `dit_tensors._delta` and `_fuse`): `B * strength` in the LoRA's dtype, the product accumulated in
    float32 and rounded to the kernel's dtype, then the sum in float32 rounded once."""
    # An fp8-cast kernel (float8_e4m3fn, upcast in the matmul) is fused in bf16, as ltx-core computes
    # its deltas, and kept there: the fused weights live only while their block runs, so rounding them
    # back to fp8 (ltx-core re-quantizes its stored copy, with stochastic rounding) would save nothing.
    out_dtype = jnp.bfloat16 if kernel.dtype == jnp.float8_e4m3fn else kernel.dtype
    scaled_b = (b.astype(jnp.float32) * strength).astype(b.dtype)
    delta = jnp.einsum("ri,or->io", a, scaled_b, preferred_element_type=jnp.float32, precision=lax.Precision.HIGHEST)
    delta = delta.astype(out_dtype).astype(jnp.float32)
    return (kernel.astype(jnp.float32) + delta).astype(out_dtype)


class LoraBlock(nnx.Module):
    """A transformer block that adds its LoRA deltas to its weights when it runs.

    The factors pass through an optimization barrier together with the block's input, so XLA cannot
    compute the fused weights of every block up front (which would hold a second copy of the DiT):
    block i's fused weights exist only while block i runs.

    Args:
        block: the base block (its parameters shared with the base model).
        factors: kernel path inside `block` -> `(A, B)`.
        strength: the LoRA's strength.
    """

    def __init__(
        self, block: nnx.Module, factors: Mapping[ParamPath, tuple[jax.Array, jax.Array]], strength: float
    ) -> None:
        self.block = block
        self.targets = tuple(factors)  # static: the kernel paths, in the order of lora_a / lora_b
        self.lora_a = nnx.List([LoraFactor(a) for a, _ in factors.values()])
        self.lora_b = nnx.List([LoraFactor(b) for _, b in factors.values()])
        self.strength = float(strength)

    def __call__(self, video_args: object, audio_args: object, *rest: object) -> tuple:
        anchor = (video_args if video_args is not None else audio_args).x
        factors = [(a.get_value(), b.get_value()) for a, b in zip(self.lora_a, self.lora_b, strict=True)]
        factors, _ = lax.optimization_barrier((factors, anchor))  # not before this block's input exists
        graphdef, state = nnx.split(self.block)
        fused = fused_values(
            dict(nnx.to_flat_state(state)), dict(zip(self.targets, factors, strict=True)), self.strength
        )

        def fuse(path: ParamPath, variable: nnx.Variable) -> nnx.Variable:
            return variable.replace(fused[path]) if path in fused else variable

        return nnx.merge(graphdef, nnx.map_state(fuse, state))(video_args, audio_args, *rest)


def fused_values(
    params: Mapping[ParamPath, nnx.Variable], factors: Mapping[ParamPath, tuple[jax.Array, jax.Array]], strength: float
) -> dict[ParamPath, jax.Array]:
    """Path -> new value of each targeted kernel (`fused_kernel`). An fp8 matmul's kernel (an `Fp8Linear`:
    float8_e4m3fn values and a `kernel_scale`) is dequantized, fused in bf16 and quantized again, so
    its matmul stays in fp8: both its values and its scale are returned."""
    out = {}
    for path, (a, b) in factors.items():
        scale_path = (*path[:-1], "kernel_scale")
        if scale_path in params:
            kernel = from_fp8(params[path].get_value(), params[scale_path].get_value(), jnp.bfloat16)
            out[path], out[scale_path] = quantize_per_tensor(fused_kernel(kernel, a, b, strength))
        else:
            out[path] = fused_kernel(params[path].get_value(), a, b, strength)
    return out


def combined(loras: Sequence[LoraWeights]) -> LoraWeights:
    """Several LoRAs as one of strength 1, for `with_lora`: per kernel, the `A`s stacked over the ranks and
    the `B`s side by side, each `B` times its LoRA's strength (rounded to its dtype, as ltx-core scales
    it), so that `B @ A` is the sum of the deltas. The sum is accumulated in float32 and rounded once,
    where ltx-core's `apply_loras` rounds each delta to the weight's dtype first (an ulp apart in bf16)."""
    if len(loras) == 1:
        return loras[0]
    parts: dict[ParamPath, list[tuple[jax.Array, jax.Array]]] = {}
    for lora in loras:
        for path, (a, b) in lora.factors.items():
            parts.setdefault(path, []).append((a, (b.astype(jnp.float32) * lora.strength).astype(b.dtype)))
    return LoraWeights(
        {
            path: (jnp.concatenate([a for a, _ in pairs], axis=0), jnp.concatenate([b for _, b in pairs], axis=1))
            for path, pairs in parts.items()
        }
    )


def with_lora(model: nnx.Module, lora: LoraWeights) -> nnx.Module:
    """`model` with `lora` applied, sharing `model`'s weight arrays (`model` itself is not modified).

    Kernels inside `model.transformer_blocks` are fused block by block as the forward runs
    (`LoraBlock`); the few outside (if the LoRA targets any) are fused here, into new arrays.
    """
    graphdef, state = nnx.split(model)
    copy = nnx.merge(graphdef, jax.tree.map(lambda x: x, state))  # new Variables, the same arrays
    state = nnx.state(copy)
    flat = dict(nnx.to_flat_state(state))
    per_block: dict[int, dict[ParamPath, tuple[jax.Array, jax.Array]]] = {}
    for path, (a, b) in lora.factors.items():
        if path not in flat:
            raise ValueError(f"with_lora: the LoRA targets {'.'.join(map(str, path))}, which this model lacks.")
        if path[0] == "transformer_blocks":
            per_block.setdefault(int(path[1]), {})[path[2:]] = (a, b)
        else:
            flat[path].set_value(fused_kernel(flat[path].get_value(), a, b, lora.strength))
    nnx.update(copy, state)
    copy.transformer_blocks = nnx.List(
        [
            LoraBlock(block, per_block[i], lora.strength) if i in per_block else block
            for i, block in enumerate(copy.transformer_blocks)
        ]
    )
    return copy
