"""The sizes and options of a Gemma 3 text model, read from a Hugging Face `config.json`.

Source: `transformers/models/gemma3/configuration_gemma3.py` (`Gemma3TextConfig`), in both of its
formats: transformers 4.x (`rope_theta`, `rope_local_base_freq`, `rope_scaling`,
`sliding_window_pattern`, as the LTX-2 Gemma directory and ltx-core 1.0.0's `config.py` write it)
and 5.x (`layer_types`, `rope_parameters` per layer type). Fields a `config.json` leaves out take
`Gemma3TextConfig`'s defaults (`HF_TEXT_DEFAULTS`), as transformers does. Options that change the
numbers and that we do not implement raise instead of being ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal

LayerType = Literal["sliding_attention", "full_attention"]
LAYER_TYPES: tuple[str, ...] = ("sliding_attention", "full_attention")

# transformers' Gemma3TextConfig defaults for the fields we read (a config.json stores only the rest).
HF_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262208,
    "hidden_size": 2304,
    "intermediate_size": 9216,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "query_pre_attn_scalar": 256,
    "rms_norm_eps": 1e-6,
    "sliding_window": 4096,
    "sliding_window_pattern": 6,
    "rope_theta": 1_000_000.0,
    "rope_local_base_freq": 10_000.0,
    "rope_scaling": None,
    "hidden_activation": "gelu_pytorch_tanh",
    "attention_bias": False,
    "attn_logit_softcapping": None,
    "final_logit_softcapping": None,
    "use_bidirectional_attention": False,
}
# Values other than these change the forward in ways this port does not implement.
_REQUIRED_VALUES: dict[str, Any] = {
    "hidden_activation": "gelu_pytorch_tanh",
    "attention_bias": False,
    "attn_logit_softcapping": None,
    "final_logit_softcapping": None,
    "use_bidirectional_attention": False,
}


@dataclasses.dataclass(frozen=True)
class Gemma3ModelConfig:
    """Gemma 3 text model sizes (Hugging Face field names).

    `layer_types[i]` says whether layer i attends within `sliding_window` tokens (RoPE base
    `rope_local_base_freq`) or to every earlier token (RoPE base `rope_theta`, positions divided by
    `rope_scaling_factor`, transformers' "linear" RoPE; 1.0 is the "default" RoPE).
    """

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    query_pre_attn_scalar: float
    rms_norm_eps: float
    sliding_window: int
    layer_types: tuple[LayerType, ...]
    rope_theta: float
    rope_local_base_freq: float
    rope_scaling_factor: float = 1.0

    def __post_init__(self) -> None:
        check_layer_types(self.layer_types)
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads={self.num_attention_heads} is not a multiple of "
                f"num_key_value_heads={self.num_key_value_heads}; grouped-query attention needs it to be."
            )

    @property
    def num_hidden_layers(self) -> int:
        return len(self.layer_types)

    @classmethod
    def from_hf_dict(cls, config: Mapping[str, Any]) -> Gemma3ModelConfig:
        """A Gemma 3 `config.json` dict: the multimodal one (`text_config` inside) or a text-only one."""
        text = config.get("text_config", config) if config.get("model_type") == "gemma3" else config
        if text.get("model_type", "gemma3_text") != "gemma3_text":
            raise ValueError(
                f"config model_type is {text.get('model_type')!r}; this port reads Gemma 3 ('gemma3' with a "
                "'gemma3_text' text_config, or 'gemma3_text')."
            )
        merged = {**HF_TEXT_DEFAULTS, **{k: v for k, v in text.items() if k in HF_TEXT_DEFAULTS}}
        wrong = {k: merged[k] for k, v in _REQUIRED_VALUES.items() if merged[k] != v}
        if wrong:
            raise ValueError(f"Gemma config has {wrong}; this port implements only {_REQUIRED_VALUES}.")
        num_layers = text.get("num_hidden_layers", merged["num_hidden_layers"])
        layer_types = tuple(
            text.get("layer_types") or _pattern_layer_types(num_layers, merged["sliding_window_pattern"])
        )
        if len(layer_types) != num_layers:
            raise ValueError(f"layer_types has {len(layer_types)} entries for num_hidden_layers={num_layers}.")
        global_theta, factor, local_theta = _rope(text, merged)
        return cls(
            **{f: merged[f] for f in _SIZE_FIELDS},
            layer_types=layer_types,
            rope_theta=global_theta,
            rope_local_base_freq=local_theta,
            rope_scaling_factor=factor,
        )


def check_layer_types(layer_types: tuple[str, ...]) -> None:
    unknown = sorted(set(layer_types) - set(LAYER_TYPES))
    if unknown:
        raise ValueError(f"layer_types holds {unknown}; each layer must be one of {LAYER_TYPES}.")


_SIZE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "query_pre_attn_scalar",
    "rms_norm_eps",
    "sliding_window",
)


def _pattern_layer_types(num_layers: int, pattern: int) -> list[str]:
    """transformers 4.x: every `pattern`-th layer (1-based) is global, the others slide."""
    return ["full_attention" if (i + 1) % pattern == 0 else "sliding_attention" for i in range(num_layers)]


def _rope(text: Mapping[str, Any], merged: Mapping[str, Any]) -> tuple[float, float, float]:
    """(global RoPE base, global linear scaling factor, local RoPE base) from either config format."""
    if "rope_parameters" in text:  # transformers 5.x: one dict per layer type
        params = text["rope_parameters"]
        glob, local = params["full_attention"], params["sliding_attention"]
        if local["rope_type"] != "default":
            raise ValueError(
                f"rope_parameters['sliding_attention'] is {local}; only rope_type 'default' is implemented."
            )
        return float(glob["rope_theta"]), _scaling_factor(glob), float(local["rope_theta"])
    scaling = merged["rope_scaling"]
    factor = 1.0 if scaling is None else _scaling_factor(scaling)
    return float(merged["rope_theta"]), factor, float(merged["rope_local_base_freq"])


def _scaling_factor(rope: Mapping[str, Any]) -> float:
    kind = rope.get("rope_type", rope.get("type"))
    if kind == "default":
        return 1.0
    if kind == "linear":
        return float(rope["factor"])
    raise ValueError(f"Gemma RoPE parameters {dict(rope)}: only rope_type 'default' and 'linear' are implemented.")
