"""fp8-cast: the transformer blocks' linear weights stored in float8_e4m3fn, upcast inside each matmul.

Source: `ltx_core/quantization/fp8_cast.py` (`QuantizationPolicy.fp8_cast()`, ltx-pipelines'
`--quantization fp8-cast`): the weights and biases of every `transformer_blocks.*` linear named
`to_q`, `to_k`, `to_v`, `to_out.0`, `ff.net.0.proj` or `ff.net.2` (video and audio attention, the
cross-modal attentions, both feed-forwards) are cast to float8_e4m3fn as they are loaded (a plain
round-to-nearest cast, no scale, as the reference's `_naive_weight_or_bias_downcast`), and each of
those linears upcasts them to the activations' dtype before its matmul (`UPCAST_DURING_INFERENCE`).
Everything else (norms, AdaLN tables, embeddings, the gated-attention logits, the output head) stays
in the model dtype. It halves the blocks' weight memory; the matmuls still run in bf16.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import jax.numpy as jnp
from flax import nnx

Quantization = Literal["none", "fp8-cast"]
QUANTIZATIONS: tuple[Quantization, ...] = ("none", "fp8-cast")
FP8 = jnp.float8_e4m3fn
_BLOCKS = "transformer_blocks."
_TARGET_MODULES = (".to_q", ".to_k", ".to_v", ".to_out.0", "ff.net.0.proj", "ff.net.2")


def check_quantization(quantization: str) -> None:
    """Raises `ValueError` naming the choices for anything but "none" and "fp8-cast"."""
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
