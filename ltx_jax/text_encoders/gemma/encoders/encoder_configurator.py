"""A Gemma 3 directory (config.json + safetensors shards) -> a loaded `Gemma3TextModel`, optionally sharded.

Source: ltx-core's `text_encoders/gemma/encoders/encoder_configurator.py` (`GEMMA3_LLM_KEY_OPS`,
which renames the checkpoint's `language_model.model.*` keys and keeps the vision tower for prompt
enhancement) and `gemma_assets.py` (`resolve_gemma_weight_paths`: every `*.safetensors` below the
folder holding `model*.safetensors`).

Checkpoint keys come in three layouts: transformers <= 4.51's `Gemma3ForConditionalGeneration`
(`language_model.model.layers.0...`, the LTX-2 Gemma directory), transformers >= 4.52's
(`model.language_model.layers.0...`) and text-only `Gemma3ForCausalLM` (`model.layers.0...`).
`GEMMA_TEXT_KEY_MAP` maps each to our attribute paths; the vision tower, the multimodal projector
and the tied `lm_head` (a copy of the embeddings, used only to generate text) are listed in
`GEMMA_IGNORED_KEYS`. Any other key is an error, as is one that two patterns match.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P

from ltx_jax.convert.placement import place_parameter, place_table
from ltx_jax.convert.safetensors_file import LazyTensor, SafetensorsFile, lazy_tensors
from ltx_jax.convert.state_dict import expected_keys, mismatch_problems, set_params, to_numpy
from ltx_jax.model.abstract import abstract_module, repeated
from ltx_jax.parallel.sharding import param_sharding
from ltx_jax.text_encoders.gemma.encoders.gemma3_config import Gemma3ModelConfig
from ltx_jax.text_encoders.gemma.encoders.gemma3_model import Gemma3TextModel

# A text-model parameter path (group 1), the part every layout shares.
GEMMA_TEXT_PARAM = r"((?:layers\.\d+|embed_tokens|norm)\..+)"
# Anchored source-key patterns -> our key (group 1).
GEMMA_TEXT_KEY_MAP: tuple[re.Pattern[str], ...] = (
    re.compile(r"language_model\.model\." + GEMMA_TEXT_PARAM),
    re.compile(r"model\.language_model\." + GEMMA_TEXT_PARAM),
    re.compile(r"model\." + GEMMA_TEXT_PARAM),
    re.compile(GEMMA_TEXT_PARAM),
)
# Keys of a Gemma 3 checkpoint that hidden states do not use (the image path and the LM head).
GEMMA_IGNORED_KEYS: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?:model\.)?vision_tower\..+"),
    re.compile(r"(?:model\.)?multi_modal_projector\..+"),
    re.compile(r"(?:language_model\.)?lm_head\.weight"),
)
_SHOWN = 8


def gemma_text_state_dict(
    state_dict: Mapping[str, Any],
    *,
    key_map: tuple[re.Pattern[str], ...] = GEMMA_TEXT_KEY_MAP,
    ignored: tuple[re.Pattern[str], ...] = GEMMA_IGNORED_KEYS,
    family: str = "Gemma 3",
) -> dict[str, Any]:
    """A Gemma checkpoint's tensors renamed to the text model's paths (see the module docstring; Gemma 4 passes
    its own `key_map` and `ignored` patterns).

    Raises `ValueError` listing the keys that no pattern (or more than one) matches, and the
    target keys that two source keys map to (two layouts mixed in one directory).
    """
    out: dict[str, Any] = {}
    unknown, ambiguous, duplicate = [], [], []
    for key, value in state_dict.items():
        hits = [m.group(1) for pattern in key_map if (m := pattern.fullmatch(key))]
        skipped = any(pattern.fullmatch(key) for pattern in ignored)
        if len(hits) + skipped == 0:
            unknown.append(key)
        elif len(hits) + skipped > 1:
            ambiguous.append(key)
        elif hits:
            if hits[0] in out:
                duplicate.append(hits[0])
            out[hits[0]] = value
    problems = [
        f"{len(items)} {label}: {', '.join(sorted(items)[:_SHOWN])}"
        for label, items in (("unknown keys", unknown), ("ambiguous keys", ambiguous), ("duplicated", duplicate))
        if items
    ]
    if problems:
        raise ValueError(
            f"state_dict is not a {family} checkpoint this loader knows: "
            + "; ".join(problems)
            + f". Known text keys: {[p.pattern for p in key_map]}; ignored: {[p.pattern for p in ignored]}."
        )
    return out


def gemma_param_sharding(shape: tuple[int, ...], mesh: Mesh | None) -> jax.sharding.Sharding:
    """Matrices split along their largest axis that the "sp" size divides; vectors replicated."""
    if mesh is None:
        return SingleDeviceSharding(jax.devices()[0])
    return param_sharding(shape, mesh, shard_weights=True) if len(shape) >= 2 else NamedSharding(mesh, P())


def load_gemma_state_dict(
    model: Gemma3TextModel, state_dict: Mapping[str, Any], mesh: Mesh | None = None, *, progress: bool = True
) -> Any:  # noqa: ANN401
    """Loads a Gemma 3 checkpoint's tensors into `model` (real or `nnx.eval_shape`-abstract) in place.

    Strict, like `ltx_jax.load_state_dict`: unknown, missing, unexpected or mis-shaped keys raise one
    `ValueError` before anything is placed. Each tensor goes straight to its devices: with a `mesh`,
    split by `gemma_param_sharding` (no device ever holds the whole model), else to the first device;
    several tensors at a time, transposed on the devices, with a progress bar on stderr (`progress`).
    Values are cast to the model's parameter dtype. Returns the model.
    """
    tensors = gemma_text_state_dict(state_dict)
    return place_gemma_tensors(
        model, tensors, mesh, config_name="Gemma3ModelConfig", label="loading Gemma", progress=progress
    )


def place_gemma_tensors(
    model: nnx.Module, tensors: Mapping[str, Any], mesh: Mesh | None, *, config_name: str, label: str, progress: bool
) -> Any:  # noqa: ANN401
    """`tensors` (renamed to `model`'s parameter paths) checked against `model`'s table, then placed as
    `load_gemma_state_dict` describes, under the progress bar `label`; an error names `config_name`
    as the config to check."""
    table = expected_keys(model)
    problems = mismatch_problems(table, tensors, {k: k for k in tensors})
    if problems:
        raise ValueError(
            f"Gemma checkpoint does not match this {type(model).__name__} ({len(table)} parameters): "
            + "; ".join(problems)
            + f". Check that the {config_name} comes from the same directory's config.json."
        )

    def place(key: str, transposed: bool, torch_shape: tuple[int, ...], dtype: np.dtype) -> jax.Array:
        sharding_for = functools.partial(gemma_param_sharding, mesh=mesh)
        return place_parameter(torch_shape, transposed, sharding_for, lambda box: _read(tensors[key], box, dtype))

    return set_params(model, place_table(table, place, label, progress))


def _read(tensor: Any, box: tuple[slice, ...], dtype: np.dtype) -> np.ndarray:  # noqa: ANN401
    """A box of a checkpoint tensor (a `LazyTensor` reads only its bytes) in `dtype`."""
    block = tensor[box] if isinstance(tensor, LazyTensor) else to_numpy(tensor)[box]
    return block.astype(dtype, copy=False)


def shard_gemma(model: Gemma3TextModel, mesh: Mesh) -> Gemma3TextModel:
    """Moves a loaded model's parameters onto `mesh` per `gemma_param_sharding`, in place.

    A forward under `jax.jit` then runs sharded (GSPMD inserts the gathers) and equals the
    single-device forward.
    """
    state = nnx.state(model, nnx.Param)
    sharded = jax.tree.map(lambda x: jax.device_put(x, gemma_param_sharding(x.shape, mesh)), state)
    nnx.update(model, sharded)
    return model


def gemma_weight_paths(gemma_root: str | Path) -> tuple[Path, ...]:
    """Every `*.safetensors` below the folder holding the first `model*.safetensors` (upstream's rule)."""
    root = Path(gemma_root)
    first = next(iter(sorted(root.rglob("model*.safetensors"))), None)
    if first is None:
        raise FileNotFoundError(f"gemma_root {str(root)!r} holds no model*.safetensors; pass the Gemma 3 directory.")
    return tuple(sorted(first.parent.rglob("*.safetensors")))


def gemma_json(gemma_root: str | Path, name: str) -> dict[str, Any]:
    """The first file called `name` below `gemma_root` (`config.json`, `tokenizer_config.json`), parsed."""
    path = next(iter(sorted(Path(gemma_root).rglob(name))), None)
    if path is None:
        raise FileNotFoundError(f"gemma_root {str(gemma_root)!r} holds no {name}; pass the Gemma 3 directory.")
    return json.loads(path.read_text())


def read_gemma_config(gemma_root: str | Path) -> Gemma3ModelConfig:
    """`Gemma3ModelConfig` from the first `config.json` below `gemma_root`."""
    return Gemma3ModelConfig.from_hf_dict(gemma_json(gemma_root, "config.json"))


def lazy_gemma_tensors(gemma_root: str | Path) -> dict[str, LazyTensor]:
    """Key -> tensor read on use, over all of the directory's safetensors shards."""
    tensors: dict[str, LazyTensor] = {}
    for path in gemma_weight_paths(gemma_root):
        file = SafetensorsFile(path)
        tensors.update(lazy_tensors(file))
    return tensors


def abstract_gemma(cfg: Gemma3ModelConfig, param_dtype: jnp.dtype) -> Gemma3TextModel:
    """`Gemma3TextModel(cfg)` with shape-only parameters: one layer traced, copied for the others
    (tracing all 48 layers in `nnx.eval_shape` takes minutes)."""
    one_layer = dataclasses.replace(cfg, layer_types=cfg.layer_types[:1])
    model = abstract_module(lambda rngs: Gemma3TextModel(one_layer, rngs=rngs, param_dtype=param_dtype))
    model.layers = repeated(model.layers[0], len(cfg.layer_types))
    model.config = cfg
    return model


def create_gemma_model(
    gemma_root: str | Path, *, param_dtype: jnp.dtype = jnp.bfloat16, mesh: Mesh | None = None
) -> Gemma3TextModel:
    """The directory's Gemma 3 text model, built without random init and loaded tensor by tensor."""
    model = abstract_gemma(read_gemma_config(gemma_root), param_dtype)
    return load_gemma_state_dict(model, lazy_gemma_tensors(gemma_root), mesh)
