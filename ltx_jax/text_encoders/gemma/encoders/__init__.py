"""Gemma text encoders in Flax NNX: Gemma 3 (LTX-2.3) and Gemma 4 (LTX-2.5), each a config, a model and its
checkpoint loading and sharding; the encoder wrapper that runs either; Gemma 3's image path (SigLIP tower,
multimodal projector, image preprocessing) for image-to-video prompt enhancement."""

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
from ltx_jax.text_encoders.gemma.encoders.gemma3_image_processor import (
    Gemma3ImageConfig,
    gemma3_pixel_values,
    read_preprocessor_config,
)
from ltx_jax.text_encoders.gemma.encoders.gemma3_model import Gemma3TextModel
from ltx_jax.text_encoders.gemma.encoders.gemma3_vision import (
    GEMMA_VISION_IGNORED_KEYS,
    GEMMA_VISION_KEY_MAP,
    Gemma3VisionConfig,
    Gemma3VisionTower,
    abstract_gemma_vision,
    create_gemma_vision,
    gemma_vision_state_dict,
    load_gemma_vision_state_dict,
    read_gemma_vision_config,
)
from ltx_jax.text_encoders.gemma.encoders.gemma4_config import Gemma4ModelConfig
from ltx_jax.text_encoders.gemma.encoders.gemma4_configurator import (
    GEMMA4_IGNORED_KEYS,
    GEMMA4_TEXT_KEY_MAP,
    abstract_gemma4,
    create_gemma4_model,
)
from ltx_jax.text_encoders.gemma.encoders.gemma4_model import Gemma4TextModel

__all__ = [
    "GEMMA4_IGNORED_KEYS",
    "GEMMA4_TEXT_KEY_MAP",
    "GEMMA_IGNORED_KEYS",
    "GEMMA_TEXT_KEY_MAP",
    "GEMMA_VISION_IGNORED_KEYS",
    "GEMMA_VISION_KEY_MAP",
    "Gemma3ImageConfig",
    "Gemma3ModelConfig",
    "Gemma3TextModel",
    "Gemma3VisionConfig",
    "Gemma3VisionTower",
    "Gemma4ModelConfig",
    "Gemma4TextModel",
    "GemmaTextEncoder",
    "abstract_gemma",
    "abstract_gemma4",
    "abstract_gemma_vision",
    "create_gemma4_model",
    "create_gemma_model",
    "create_gemma_vision",
    "gemma3_pixel_values",
    "gemma_param_sharding",
    "gemma_text_state_dict",
    "gemma_vision_state_dict",
    "lazy_gemma_tensors",
    "load_gemma_state_dict",
    "load_gemma_vision_state_dict",
    "read_gemma_config",
    "read_gemma_vision_config",
    "read_preprocessor_config",
    "shard_gemma",
]
