"""The sizes and options of the Gemma 4 text model LTX-2.5 encodes prompts with, read from its config.

Source: `transformers/models/gemma4_unified/configuration_gemma4_unified.py` (transformers 5.14.1, the version
ltx-core 1.2.0 pins): `Gemma4UnifiedTextConfig` inside `Gemma4UnifiedConfig`, as the `gemma_config` metadata of
an LTX-2.5 text-encoder file or a Gemma 4 directory's `config.json` stores it. Fields the JSON leaves out take
`Gemma4UnifiedTextConfig`'s defaults (`HF_TEXT_DEFAULTS`), as transformers does. Options that change the
hidden states and that this port does not implement raise instead of being ignored.

Two kinds of layer: sliding ones (`head_dim`, `num_key_value_heads`, RoPE "default" over the whole head) and
full ones (`global_head_dim`; with `attention_k_eq_v`, `num_global_key_value_heads` heads whose values are the
key projection; RoPE "proportional": the first `partial_rotary_factor` of the frequencies, the rest zero).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from ltx_jax.text_encoders.gemma.encoders.gemma3_config import LAYER_TYPES, LayerType, check_layer_types

# transformers' Gemma4UnifiedTextConfig defaults for the fields we read (a config.json stores only the rest).
HF_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262_144,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 30,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "global_head_dim": 512,
    "num_global_key_value_heads": None,
    "attention_k_eq_v": False,
    "rms_norm_eps": 1e-6,
    "sliding_window": 1024,
    "pad_token_id": 0,
    "hidden_activation": "gelu_pytorch_tanh",
    "attention_bias": False,
    "use_bidirectional_attention": "vision",
    "num_kv_shared_layers": 0,
}
# Values other than these change the text-only forward in ways this port does not implement ("vision" makes
# image tokens attend both ways; text stays causal).
_ALLOWED_VALUES: dict[str, tuple[Any, ...]] = {
    "hidden_activation": ("gelu_pytorch_tanh",),
    "attention_bias": (False,),
    "use_bidirectional_attention": (None, "vision"),
    "num_kv_shared_layers": (0,),
}
# Gemma4UnifiedConfig's multimodal placeholder ids: the model embeds them as `pad_token_id` (they are filled in
# by image, video or audio features, which prompt encoding never has).
MULTIMODAL_TOKEN_DEFAULTS: dict[str, int] = {
    "image_token_id": 258_880,
    "video_token_id": 258_884,
    "audio_token_id": 258_881,
}
_DEFAULT_ROPE: dict[str, dict[str, Any]] = {
    "sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
    "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1_000_000.0},
}


@dataclasses.dataclass(frozen=True)
class Gemma4Rope:
    """One layer kind's entry of transformers' `rope_parameters`."""

    rope_type: str
    rope_theta: float
    partial_rotary_factor: float = 1.0
    factor: float = 1.0

    @classmethod
    def from_hf_dict(cls, kind: str, params: Mapping[str, Any]) -> Gemma4Rope:
        if params.get("rope_type") not in ("default", "proportional"):
            raise ValueError(
                f"rope_parameters[{kind!r}] is {dict(params)}; this port implements rope_type 'default' and "
                "'proportional'."
            )
        return cls(**{f.name: params[f.name] for f in dataclasses.fields(cls) if f.name in params})


@dataclasses.dataclass(frozen=True)
class Gemma4ModelConfig:
    """Gemma 4 text model sizes (Hugging Face field names; see the module docstring for the two layer kinds)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    global_head_dim: int
    num_global_key_value_heads: int
    attention_k_eq_v: bool
    rms_norm_eps: float
    sliding_window: int
    layer_types: tuple[LayerType, ...]
    sliding_rope: Gemma4Rope
    full_rope: Gemma4Rope
    pad_token_id: int = 0
    multimodal_token_ids: tuple[int, ...] = tuple(MULTIMODAL_TOKEN_DEFAULTS.values())

    def __post_init__(self) -> None:
        check_layer_types(self.layer_types)
        for kind in LAYER_TYPES:
            heads = self.kv_heads(kind)
            if self.num_attention_heads % heads:
                raise ValueError(
                    f"num_attention_heads={self.num_attention_heads} is not a multiple of the {kind} layers' "
                    f"{heads} key-value heads; grouped-query attention needs it to be."
                )

    @property
    def num_hidden_layers(self) -> int:
        return len(self.layer_types)

    def layer_head_dim(self, kind: str) -> int:
        """The head width of a layer of `kind` (transformers: `global_head_dim` for full layers when set)."""
        return self.global_head_dim if kind == "full_attention" and self.global_head_dim else self.head_dim

    def kv_heads(self, kind: str) -> int:
        return self.num_global_key_value_heads if self.values_are_keys(kind) else self.num_key_value_heads

    def values_are_keys(self, kind: str) -> bool:
        """Whether layers of `kind` have no `v_proj`: their values are the key projection (before `k_norm`)."""
        return self.attention_k_eq_v and kind == "full_attention"

    def rope_inv_freq(self, kind: str) -> np.ndarray:
        """(layer head dim / 2,) float32 inverse frequencies of a layer of `kind`, as transformers computes them."""
        rope = self.full_rope if kind == "full_attention" else self.sliding_rope
        base, factor = np.float32(rope.rope_theta), np.float32(rope.factor)
        if rope.rope_type == "default":  # transformers reads `config.head_dim` here, for either kind
            dim, rotated, factor = self.head_dim, self.head_dim // 2, np.float32(1.0)
        else:  # "proportional"
            dim = self.layer_head_dim(kind)
            rotated = int(rope.partial_rotary_factor * dim // 2)
        exponents = np.arange(0, 2 * rotated, 2, dtype=np.float32) / np.float32(dim)
        inv_freq = np.concatenate([np.float32(1.0) / np.power(base, exponents), np.zeros(dim // 2 - rotated)])
        return (inv_freq / factor).astype(np.float32)

    @classmethod
    def from_hf_dict(cls, config: Mapping[str, Any]) -> Gemma4ModelConfig:
        """A `gemma4_unified` config (with `text_config` inside) or its `gemma4_unified_text` part."""
        outer = config if config.get("model_type") == "gemma4_unified" else {}
        text = config.get("text_config", config) if outer else config
        if text.get("model_type", "gemma4_unified_text") != "gemma4_unified_text":
            raise ValueError(
                f"config model_type is {text.get('model_type')!r}; this port reads Gemma 4 unified ('gemma4_unified' "
                "with a 'gemma4_unified_text' text_config), the text encoder of LTX-2.5."
            )
        merged = {**HF_TEXT_DEFAULTS, **{k: v for k, v in text.items() if k in HF_TEXT_DEFAULTS}}
        wrong = {k: merged[k] for k, allowed in _ALLOWED_VALUES.items() if merged[k] not in allowed}
        if wrong:
            raise ValueError(f"Gemma 4 config has {wrong}; this port implements only {_ALLOWED_VALUES}.")
        num_layers = merged["num_hidden_layers"]
        layer_types = list(text.get("layer_types") or _pattern_layer_types(num_layers))
        if len(layer_types) != num_layers:
            raise ValueError(f"layer_types has {len(layer_types)} entries for num_hidden_layers={num_layers}.")
        layer_types[-1] = "full_attention"  # transformers forces it (with a warning)
        rope = {**_DEFAULT_ROPE, **(text.get("rope_parameters") or {})}
        sizes = {f: merged[f] for f in _FIELDS}
        sizes["num_global_key_value_heads"] = sizes["num_global_key_value_heads"] or sizes["num_key_value_heads"]
        tokens = {k: outer.get(k, v) for k, v in MULTIMODAL_TOKEN_DEFAULTS.items()}
        return cls(
            **sizes,
            layer_types=tuple(layer_types),
            sliding_rope=Gemma4Rope.from_hf_dict("sliding_attention", rope["sliding_attention"]),
            full_rope=Gemma4Rope.from_hf_dict("full_attention", rope["full_attention"]),
            multimodal_token_ids=tuple(v for v in tokens.values() if v is not None),
        )


_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "global_head_dim",
    "num_global_key_value_heads",
    "attention_k_eq_v",
    "rms_norm_eps",
    "sliding_window",
    "pad_token_id",
)


def _pattern_layer_types(num_layers: int) -> list[str]:
    """transformers' default: five sliding layers, then a full one."""
    return ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(num_layers)]
