"""ltx-core state dicts -> `LTXModel` parameters.

The model's attribute paths equal the checkpoint keys, so the table is derived from the model
itself: every parameter path maps to one key, and a `Linear` kernel maps to the transposed
`weight`. Loading is strict: every problem is collected, then one `ValueError` names them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jax
import ml_dtypes
import numpy as np
from flax import nnx

from ltx_jax.convert.placement import place_table

DIT_PREFIX = "model.diffusion_model."
_SHOWN = 8  # offending keys listed per kind of problem
_TILE = 128  # transpose tiles (128 x 128) that stay in cache


def param_key(path: tuple[Any, ...], ndim: int = 2) -> tuple[str, bool]:
    """nnx parameter path -> (ltx-core state-dict key, whether the tensor is transposed)."""
    *module, leaf = (str(p) for p in path)
    if leaf == "kernel" and ndim == 2:  # nnx.Linear stores (in, out); torch stores weight as (out, in)
        return ".".join([*module, "weight"]), True
    # Other `kernel`s are torch tensors of that name (the upsampler's 4-D blur kernel): kept as they are.
    return ".".join([*module, leaf]), False


def param_variables(model: nnx.Module) -> dict[tuple[Any, ...], nnx.Param]:
    """Every `nnx.Param` of `model` by path, in `nnx.state`'s order: the model's own variables, so
    setting one's value sets the model's. One walk of the graph (`nnx.iter_graph`); `nnx.state` also
    builds a new state from it, about twice the time for the 48-block DiT (`bench_abstract.py`)."""
    return {path: node for path, node in nnx.iter_graph(model) if isinstance(node, nnx.Param)}


def expected_keys(model: nnx.Module) -> dict[str, tuple[tuple[Any, ...], bool, tuple[int, ...], np.dtype]]:
    """Checkpoint key -> (parameter path, transposed, torch-layout shape, parameter dtype)."""
    table = {}
    for path, variable in param_variables(model).items():
        value = variable.get_value()
        key, transposed = param_key(path, len(value.shape))
        shape = tuple(reversed(value.shape)) if transposed else tuple(value.shape)
        table[key] = (path, transposed, shape, value.dtype)
    return table


def to_numpy(value: Any) -> np.ndarray:  # noqa: ANN401 - torch tensors, numpy or jax arrays
    """A torch tensor or array -> numpy, bit-exact: bf16 and fp8 are reinterpreted, never upcast."""
    if type(value).__module__.startswith("torch"):
        import torch  # noqa: PLC0415 - torch is optional; only torch inputs reach here

        tensor = value.detach().cpu()
        reinterpret = {torch.bfloat16: (torch.int16, ml_dtypes.bfloat16)}
        if hasattr(torch, "float8_e4m3fn"):
            reinterpret[torch.float8_e4m3fn] = (torch.uint8, ml_dtypes.float8_e4m3fn)
        if tensor.dtype in reinterpret:
            raw, target = reinterpret[tensor.dtype]
            return tensor.view(raw).numpy().view(target)
        return tensor.numpy()
    return np.asarray(value)


def transpose(matrix: np.ndarray) -> np.ndarray:
    """A contiguous transposed copy of a 2-D array, tile by tile.

    A plain `ascontiguousarray(a.T)` strides through memory, and with LTX-2's power-of-two widths every
    element of a column falls in the same cache set: 0.02-0.07 GB/s for a 4096 x 16384 bf16 weight on the
    2-core CI machine, as were the 256 x 4096 tiles used before. Each 128 x 128 tile is copied out
    contiguously, transposed within the cache, and written back a row at a time: 1.1-1.6 GB/s there for
    LTX-2.3's shapes (benchmarks/bench_transpose.py). Moves raw bits, so ml_dtypes' bfloat16 goes through
    the native-integer path too.
    """
    bits = matrix.view(np.dtype(f"uint{8 * matrix.dtype.itemsize}"))
    rows, cols = bits.shape
    out = np.empty((cols, rows), bits.dtype)
    for i in range(0, rows, _TILE):
        for j in range(0, cols, _TILE):
            tile = np.ascontiguousarray(bits[i : i + _TILE, j : j + _TILE])
            out[j : j + _TILE, i : i + _TILE] = np.ascontiguousarray(tile.T)
    return out.view(matrix.dtype)


def strip_prefix(keys: Iterable[str], prefix: str = DIT_PREFIX) -> dict[str, str]:
    """Key without `prefix` -> original key. Keys without the prefix stay as they are."""
    return {(k[len(prefix) :] if k.startswith(prefix) else k): k for k in keys}


def mismatch_problems(
    table: Mapping[str, tuple[Any, bool, tuple[int, ...], np.dtype]],
    state_dict: Mapping[str, Any],
    names: dict[str, str],
) -> list[str]:
    missing = sorted(set(table) - set(names))
    unexpected = sorted(names[k] for k in set(names) - set(table))
    wrong_shape = [
        f"{names[k]}: checkpoint {tuple(state_dict[names[k]].shape)}, model expects {table[k][2]}"
        for k in sorted(set(table) & set(names))
        if tuple(state_dict[names[k]].shape) != table[k][2]
    ]
    kinds = (("missing keys", missing), ("unexpected keys", unexpected), ("wrong shapes", wrong_shape))
    return [f"{len(items)} {label}: {named_keys(items)}" for label, items in kinds if items]


def named_keys(keys: Sequence[str]) -> str:
    """The first `_SHOWN` of `keys`, and how many more there are, for an error message."""
    more = f" ... and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else ""
    return ", ".join(keys[:_SHOWN]) + more


def load_state_dict(
    model: nnx.Module, state_dict: Mapping[str, Any], prefix: str = DIT_PREFIX, *, progress: bool = False
) -> nnx.Module:
    """Loads ltx-core-named weights into `model` in place, cast to the model's parameter dtype.

    Works for any module whose attribute paths are the state-dict keys (the DiT, the VAEs, the
    vocoder, ...). Keys may carry the checkpoint `prefix` (the DiT's `model.diffusion_model.` by
    default; `vae.`, `audio_vae.`, `vocoder.` for the others); values may be torch tensors, numpy or
    jax arrays. Raises `ValueError` naming the first offending keys if any key is missing,
    unexpected, or of the wrong shape; the model is left untouched then. Tensors go to the default
    device several at a time, transposed there (`progress`: a progress bar on stderr).
    """
    table = expected_keys(model)
    names = strip_prefix(state_dict, prefix)
    if len(names) != len(state_dict):
        raise ValueError(f"state_dict holds the same parameter with and without the {prefix!r} prefix.")
    problems = mismatch_problems(table, state_dict, names)
    if problems:
        hint = (
            "Check that the checkpoint's config (heads, layers, gating, cross-attention AdaLN, caption "
            "projection) matches the model's LTXConfig."
            if prefix == DIT_PREFIX
            else f"Check that the module's config matches the checkpoint and that the keys carry the {prefix!r} prefix."
        )
        raise ValueError(
            f"state_dict does not match this {type(model).__name__} ({len(table)} parameters): "
            + "; ".join(problems)
            + ". "
            + hint
        )

    def place(key: str, transposed: bool, torch_shape: tuple[int, ...], dtype: np.dtype) -> jax.Array:
        # uncommitted, on the default device as jnp.asarray puts it, so jit may move it next to its other inputs
        stored = jax.device_put(_read(state_dict[names[key]], dtype))
        return _transpose(stored) if transposed else stored

    return set_params(model, place_table(table, place, f"loading {type(model).__name__}", progress))


def set_params(model: nnx.Module, values: Mapping[tuple[Any, ...], jax.Array]) -> nnx.Module:
    """Sets every `nnx.Param` of `model` from `values` (parameter path -> array), in place; returns `model`."""
    for path, variable in param_variables(model).items():
        variable.set_value(values[path])
    return model


def _read(value: Any, dtype: np.dtype) -> np.ndarray:  # noqa: ANN401
    """A state-dict value (torch, numpy, jax or a `LazyTensor`) as a numpy array of `dtype`."""
    return to_numpy(value).astype(dtype, copy=False)


@jax.jit
def _transpose(matrix: jax.Array) -> jax.Array:
    """A torch `[out, in]` weight -> the `[in, out]` kernel, on the device (moving bits: exact)."""
    return matrix.T
