"""The Gemma 3 12B configuration ltx-core builds its text encoder with.

Source: ltx-core 1.0.0 `ltx_core/text_encoders/gemma/config.py` (field names and values of the
Hugging Face `Gemma3Config`). Upstream dropped this file: it now reads the config from the Gemma
directory (`gemma_assets.py`), so LTX-2.5's Gemma 4 gets its own sizes. The embeddings processor
reads only `hidden_size` and `num_hidden_layers` (see `GEMMA3_HIDDEN_STATES`).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Gemma3RopeScaling:
    factor: float = 8.0
    rope_type: str = "linear"


@dataclasses.dataclass(frozen=True)
class Gemma3TextConfig:
    attention_bias: bool = False
    attention_dropout: float = 0.0
    attn_logit_softcapping: float | None = None
    cache_implementation: str = "hybrid"
    final_logit_softcapping: float | None = None
    head_dim: int = 256
    hidden_activation: str = "gelu_pytorch_tanh"
    hidden_size: int = 3840
    initializer_range: float = 0.02
    intermediate_size: int = 15360
    max_position_embeddings: int = 131072
    model_type: str = "gemma3_text"
    num_attention_heads: int = 16
    num_hidden_layers: int = 48
    num_key_value_heads: int = 8
    query_pre_attn_scalar: int = 256
    rms_norm_eps: float = 1e-06
    rope_local_base_freq: int = 10000
    rope_scaling: Gemma3RopeScaling = dataclasses.field(default_factory=Gemma3RopeScaling)
    rope_theta: int = 1000000
    sliding_window: int = 1024
    sliding_window_pattern: int = 6
    torch_dtype: str = "float32"
    use_cache: bool = True
    vocab_size: int = 262208


@dataclasses.dataclass(frozen=True)
class Gemma3VisionConfig:
    attention_dropout: float = 0.0
    hidden_act: str = "gelu_pytorch_tanh"
    hidden_size: int = 1152
    image_size: int = 896
    intermediate_size: int = 4304
    layer_norm_eps: float = 1e-06
    model_type: str = "siglip_vision_model"
    num_attention_heads: int = 16
    num_channels: int = 3
    num_hidden_layers: int = 27
    patch_size: int = 14
    torch_dtype: str = "float32"
    vision_use_head: bool = False


@dataclasses.dataclass(frozen=True)
class Gemma3ConfigData:
    architectures: tuple[str, ...] = ("Gemma3ForConditionalGeneration",)
    boi_token_index: int = 255999
    eoi_token_index: int = 256000
    eos_token_id: tuple[int, ...] = (1, 106)
    image_token_index: int = 262144
    initializer_range: float = 0.02
    mm_tokens_per_image: int = 256
    model_type: str = "gemma3"
    text_config: Gemma3TextConfig = dataclasses.field(default_factory=Gemma3TextConfig)
    torch_dtype: str = "bfloat16"
    transformers_version: str = "4.51.0"
    vision_config: Gemma3VisionConfig = dataclasses.field(default_factory=Gemma3VisionConfig)

    def to_dict(self) -> dict:
        """The nested dict `transformers.Gemma3Config.from_dict` takes (lists where ltx-core has lists)."""
        out = dataclasses.asdict(self)
        out["architectures"], out["eos_token_id"] = list(self.architectures), list(self.eos_token_id)
        return out


GEMMA3_CONFIG_FOR_LTX = Gemma3ConfigData()
# (hidden size, stacked hidden states = embeddings + every layer) of the Gemma the features come from.
GEMMA3_HIDDEN_STATES = (
    GEMMA3_CONFIG_FOR_LTX.text_config.hidden_size,
    GEMMA3_CONFIG_FOR_LTX.text_config.num_hidden_layers + 1,
)
