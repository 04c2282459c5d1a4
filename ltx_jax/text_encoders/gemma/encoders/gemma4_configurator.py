"""LTX-2.5's Gemma 4 text encoder (a packed file or a directory) -> a loaded `Gemma4TextModel`, optionally sharded.

Source: ltx-core 1.2.0 `text_encoders/gemma/encoders/encoder_configurator.py` (`_build_gemma4_unified_llm_key_ops`):
the language model's keys come Comfy-flat (`model.layers.*`, `model.embed_tokens.*`, `model.norm.*`, as the
packed LTX-2.5 file has them) or as Hugging Face's (`model.language_model.*`). The image and audio embedders
(`vision_model.*`, `multi_modal_projector.*`, `audio_projector.*`, or `model.embed_vision.*`,
`model.vision_embedder.*`, `model.embed_audio.*`), the packed tokenizer and sidecars, the tied `lm_head` and the
feature extractor's `text_embedding_projection.*` (the embeddings processor's) are not the text model's. Any
other key is an error, as is one that two patterns match.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from ltx_jax.model.abstract import abstract_module
from ltx_jax.text_encoders.gemma.encoders.encoder_configurator import (
    GEMMA_TEXT_PARAM,
    gemma_text_state_dict,
    place_gemma_tensors,
)
from ltx_jax.text_encoders.gemma.encoders.gemma4_config import Gemma4ModelConfig
from ltx_jax.text_encoders.gemma.encoders.gemma4_model import Gemma4TextModel
from ltx_jax.text_encoders.gemma.gemma_assets import GemmaAssets

GEMMA4_TEXT_KEY_MAP: tuple[re.Pattern[str], ...] = (
    re.compile(r"model\.language_model\." + GEMMA_TEXT_PARAM),
    re.compile(r"model\." + GEMMA_TEXT_PARAM),
)
GEMMA4_IGNORED_KEYS: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?:vision_model|multi_modal_projector|audio_projector)\..+"),
    re.compile(r"model\.(?:embed_vision|vision_embedder|embed_audio)\..+"),
    re.compile(r"text_embedding_projection\..+"),
    re.compile(r"tokenizer_json|hf_asset__.+"),
    re.compile(r"(?:model\.)?lm_head\.weight"),
)


def abstract_gemma4(cfg: Gemma4ModelConfig, param_dtype: jnp.dtype) -> Gemma4TextModel:
    """`Gemma4TextModel(cfg)` with shape-only parameters: one layer of each kind traced, copied for the others
    (tracing all 48 layers in `nnx.eval_shape` takes minutes)."""
    kinds = tuple(dict.fromkeys(cfg.layer_types))
    model = abstract_module(
        lambda rngs: Gemma4TextModel(dataclasses.replace(cfg, layer_types=kinds), rngs=rngs, param_dtype=param_dtype)
    )
    traced = {kind: nnx.split(layer) for kind, layer in zip(kinds, model.layers, strict=True)}
    model.layers = nnx.List([nnx.merge(*traced[kind], copy=True) for kind in cfg.layer_types])
    model.config = cfg
    return model


def read_gemma4_config(assets: GemmaAssets) -> Gemma4ModelConfig:
    """The text model's config from the assets' Hugging Face config, with the file named in an error."""
    try:
        return Gemma4ModelConfig.from_hf_dict(assets.config)
    except ValueError as error:
        raise ValueError(f"{assets.source}: {error}") from None


def create_gemma4_model(
    path: str | Path | GemmaAssets, *, param_dtype: jnp.dtype = jnp.bfloat16, mesh: Mesh | None = None
) -> Gemma4TextModel:
    """The Gemma 4 text model of a packed text-encoder file or a directory, built without random init and
    loaded tensor by tensor (split over `mesh` if given, as `load_gemma_state_dict` describes)."""
    assets = path if isinstance(path, GemmaAssets) else GemmaAssets.load(path)
    model = abstract_gemma4(read_gemma4_config(assets), param_dtype)
    tensors = gemma_text_state_dict(
        assets.lazy_tensors(), key_map=GEMMA4_TEXT_KEY_MAP, ignored=GEMMA4_IGNORED_KEYS, family="Gemma 4"
    )
    return place_gemma_tensors(
        model, tensors, mesh, config_name="Gemma 4 config", label="loading Gemma 4", progress=True
    )
