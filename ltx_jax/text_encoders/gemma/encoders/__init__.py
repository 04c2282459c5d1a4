"""Gemma 3 text encoder in Flax NNX: config, model, checkpoint loading and sharding, the encoder wrapper."""

from ltx_jax.text_encoders.gemma.encoders.base_encoder import GemmaTextEncoder
from ltx_jax.text_encoders.gemma.encoders.encoder_configurator import (
    GEMMA_IGNORED_KEYS,
    GEMMA_TEXT_KEY_MAP,
    abstract_gemma,
    create_gemma_model,
    gemma_param_sharding,
    gemma_text_state_dict,
    lazy_gemma_tensors,
    load_gemma_state_dict,
    read_gemma_config,
    shard_gemma,
)
from ltx_jax.text_encoders.gemma.encoders.gemma3_config import Gemma3ModelConfig
from ltx_jax.text_encoders.gemma.encoders.gemma3_model import Gemma3TextModel

__all__ = [
    "GEMMA_IGNORED_KEYS",
    "GEMMA_TEXT_KEY_MAP",
    "Gemma3ModelConfig",
    "Gemma3TextModel",
    "GemmaTextEncoder",
    "abstract_gemma",
    "create_gemma_model",
    "gemma_param_sharding",
    "gemma_text_state_dict",
    "lazy_gemma_tensors",
    "load_gemma_state_dict",
    "read_gemma_config",
    "shard_gemma",
]
