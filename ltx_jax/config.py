"""`LTXConfig`: the DiT's architecture, with the keyword names of ltx-core's `LTXModel`.

Source: `ltx_core/model/transformer/model.py` (`LTXModel.__init__`) and
`ltx_core/model/transformer/model_configurator.py` (`LTXModelConfigurator.from_config`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, get_args

ModelType = Literal["video", "audio", "av"]
RopeType = Literal["split", "interleaved"]

# Values that ltx-core's configurator asserts on every checkpoint: the architecture we implement.
_REQUIRED_METADATA_VALUES: dict[str, Any] = {
    "dropout": 0.0,
    "attention_bias": True,
    "num_vector_embeds": None,
    "activation_fn": "gelu-approximate",
    "num_embeds_ada_norm": 1000,
    "use_linear_projection": False,
    "only_cross_attention": False,
    "cross_attention_norm": True,
    "double_self_attention": False,
    "upcast_attention": False,
    "standardization_norm": "rms_norm",
    "norm_elementwise_affine": False,
    "qk_norm": "rms_norm",
    "positional_embedding_type": "rope",
    "use_middle_indices_grid": True,
}
# Asserted only for audio-video models.
_REQUIRED_AV_METADATA_VALUES: dict[str, Any] = {
    "use_audio_video_cross_attention": True,
    "share_ff": False,
    "av_cross_ada_norm": True,
}
# Keys the checkpoint config carries that do not change the DiT: they belong to the text
# connectors, the caption-projection variants of the text encoder, or to diffusers bookkeeping.
_IGNORED_METADATA_KEYS = frozenset(
    {
        "_class_name",
        "_diffusers_version",
        "attention_type",
        "norm_num_groups",
        "causal_temporal_positioning",
        "use_embeddings_connector",
        "caption_projection_first_linear",
        "caption_projection_second_linear",
        "caption_proj_input_norm",
        "text_encoder_norm_type",
    }
)
_IGNORED_METADATA_PREFIXES = ("connector_", "audio_connector_")
# Metadata keys read by `from_metadata` other than the LTXConfig fields of the same name.
_SPECIAL_METADATA_KEYS = frozenset({"frequencies_precision", "caption_proj_before_connector"})


@dataclasses.dataclass(frozen=True)
class LTXConfig:
    """The LTX-2 DiT architecture. Field names are `ltx_core.LTXModel`'s keyword arguments.

    Differences from those keywords, each because a keyword there is not plain data:
      * `model_type` takes "video", "audio" or "av" (ltx-core's `LTXModelType`).
      * `rope_type` takes "split" or "interleaved" (ltx-core's `LTXRopeType`). The default is
        "split", upstream's current default; the ltx-core 1.0.0 wheel defaulted to "interleaved".
      * `caption_channels` replaces the `caption_projection` modules: an int builds the 19B-style
        caption projection inside the DiT (`caption_channels -> inner_dim -> inner_dim`); `None`
        (2.3+) means the text encoder already projected the context.
      * `av_ca_scale_shift_from_sigma`: upstream feeds each modality's own per-token timesteps to
        the audio-video cross-attention scale/shift AdaLN; ltx-core 1.0.0 fed the other modality's
        sigma. False (default) is upstream; True reproduces ltx-core 1.0.0.
    """

    model_type: ModelType = "av"
    num_attention_heads: int = 32
    attention_head_dim: int = 128
    in_channels: int = 128
    out_channels: int = 128
    num_layers: int = 48
    cross_attention_dim: int = 4096
    norm_eps: float = 1e-6
    positional_embedding_theta: float = 10000.0
    positional_embedding_max_pos: tuple[int, ...] = (20, 2048, 2048)
    timestep_scale_multiplier: float = 1000
    use_middle_indices_grid: bool = True
    audio_num_attention_heads: int = 32
    audio_attention_head_dim: int = 64
    audio_in_channels: int = 128
    audio_out_channels: int = 128
    audio_cross_attention_dim: int = 2048
    audio_positional_embedding_max_pos: tuple[int, ...] = (20,)
    av_ca_timestep_scale_multiplier: float = 1
    rope_type: RopeType = "split"
    double_precision_rope: bool = False
    apply_gated_attention: bool = False
    caption_channels: int | None = None
    cross_attention_adaln: bool = False
    use_prompt_adaln_single: bool = True
    ff_bias: bool = True
    audio_ff_bias: bool = True
    use_keyframes_abs_pos_embedding: bool = False
    av_ca_scale_shift_from_sigma: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "positional_embedding_max_pos", tuple(self.positional_embedding_max_pos))
        object.__setattr__(self, "audio_positional_embedding_max_pos", tuple(self.audio_positional_embedding_max_pos))
        _check_choice("model_type", self.model_type, get_args(ModelType))
        _check_choice("rope_type", self.rope_type, get_args(RopeType))
        if self.has_video:
            self._check_stream("", self.num_attention_heads, self.attention_head_dim, self.cross_attention_dim)
        if self.has_audio:
            self._check_stream(
                "audio_", self.audio_num_attention_heads, self.audio_attention_head_dim, self.audio_cross_attention_dim
            )

    def _check_stream(self, prefix: str, heads: int, head_dim: int, cross_attention_dim: int) -> None:
        for name, value in ((f"{prefix}num_attention_heads", heads), (f"{prefix}attention_head_dim", head_dim)):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}.")
        if self.rope_type == "split" and head_dim % 2:
            raise ValueError(
                f"{prefix}attention_head_dim ({head_dim}) must be even with rope_type='split': "
                "each head rotates its two halves against each other."
            )
        if cross_attention_dim != heads * head_dim:
            # The DiT reshapes the text context to its own width, and the audio-video
            # cross-attention RoPE spans audio_cross_attention_dim: both need equal widths.
            raise ValueError(
                f"{prefix}cross_attention_dim ({cross_attention_dim}) must equal {prefix}num_attention_heads * "
                f"{prefix}attention_head_dim ({heads * head_dim})."
            )

    @property
    def has_video(self) -> bool:
        return self.model_type in ("video", "av")

    @property
    def has_audio(self) -> bool:
        return self.model_type in ("audio", "av")

    @property
    def inner_dim(self) -> int:
        """Video hidden width: `num_attention_heads * attention_head_dim`."""
        return self.num_attention_heads * self.attention_head_dim

    @property
    def audio_inner_dim(self) -> int:
        """Audio hidden width: `audio_num_attention_heads * audio_attention_head_dim`."""
        return self.audio_num_attention_heads * self.audio_attention_head_dim

    @property
    def cross_pe_max_pos(self) -> int:
        """Max time position of the audio-video cross-attention RoPE (both streams share it)."""
        return max(self.positional_embedding_max_pos[0], self.audio_positional_embedding_max_pos[0])

    @classmethod
    def from_metadata(cls, config: dict[str, Any], *, model_type: ModelType = "av", **overrides: Any) -> LTXConfig:
        """Builds the config from a checkpoint's parsed `config` metadata (`{"transformer": {...}}`).

        Like ltx-core's configurator it asserts the fixed architecture values; unlike it, a key it
        does not know is an error rather than silently ignored. `overrides` replace fields after
        parsing (e.g. `num_layers=8` for a truncated test model).
        """
        if not isinstance(config, dict) or not isinstance(config.get("transformer"), dict):
            raise ValueError(
                "The checkpoint config has no 'transformer' section: expected the parsed "
                "`__metadata__['config']` JSON, {'transformer': {...}, ...}. Pass the config explicitly "
                "if the checkpoint carries none."
            )
        section = config["transformer"]
        required = dict(_REQUIRED_METADATA_VALUES)
        if model_type == "av":
            required.update(_REQUIRED_AV_METADATA_VALUES)
        for key, expected in required.items():
            if section.get(key) != expected:
                raise ValueError(
                    f"Checkpoint config transformer.{key} is {section.get(key)!r}; ltx-jax implements only "
                    f"{expected!r} (as ltx-core does)."
                )
        field_names = {f.name for f in dataclasses.fields(cls)}
        known = field_names | set(required) | set(_REQUIRED_AV_METADATA_VALUES) | _SPECIAL_METADATA_KEYS
        unknown = sorted(
            k
            for k in section
            if k not in known and k not in _IGNORED_METADATA_KEYS and not k.startswith(_IGNORED_METADATA_PREFIXES)
        )
        if unknown:
            raise ValueError(
                f"Checkpoint config transformer section has keys ltx-jax does not know: {unknown}. "
                "They may change the model; pass a corrected config (convert_checkpoint.py --config) "
                "after checking what they mean."
            )
        kwargs = {k: v for k, v in section.items() if k in field_names and k != "model_type"}
        kwargs["model_type"] = model_type
        kwargs["double_precision_rope"] = _parse_frequencies_precision(section.get("frequencies_precision"))
        if section.get("caption_proj_before_connector", False):
            kwargs["caption_channels"] = None
        elif "caption_channels" not in section:
            raise ValueError(
                "Checkpoint config has neither caption_proj_before_connector=true (2.3+) nor "
                "caption_channels (19B): cannot tell whether the DiT projects the text context."
            )
        kwargs.update(overrides)
        return cls(**kwargs)

    def to_metadata(self) -> dict[str, Any]:
        """The checkpoint `config` JSON (`{"transformer": {...}}`) that `from_metadata` reads back as
        this config (with `model_type=self.model_type`, which checkpoints leave to their keys)."""
        transformer = {
            k: v
            for k, v in dataclasses.asdict(self).items()
            if k not in ("model_type", "double_precision_rope", "caption_channels")
        }
        transformer.update(_REQUIRED_METADATA_VALUES, **_REQUIRED_AV_METADATA_VALUES)
        transformer["frequencies_precision"] = "float64" if self.double_precision_rope else "float32"
        transformer["caption_proj_before_connector"] = self.caption_channels is None
        if self.caption_channels is not None:
            transformer["caption_channels"] = self.caption_channels
        return {"transformer": transformer}

    @classmethod
    def ltx2_19b(cls, **overrides: Any) -> LTXConfig:
        """LTX-2 19B: caption projection inside the DiT, no gating, 6-row AdaLN."""
        return cls(
            caption_channels=3840,
            av_ca_timestep_scale_multiplier=1000,
            double_precision_rope=True,
            **overrides,
        )

    @classmethod
    def ltx2_3(cls, **overrides: Any) -> LTXConfig:
        """LTX-2.3 22B: gated attention, cross-attention AdaLN, context projected by the text encoder."""
        return cls(
            apply_gated_attention=True,
            cross_attention_adaln=True,
            av_ca_timestep_scale_multiplier=1000,
            double_precision_rope=True,
            **overrides,
        )

    @classmethod
    def tiny(cls, **overrides: Any) -> LTXConfig:
        """A few-thousand-parameter model with every branch of the real one, for tests and demos."""
        defaults: dict[str, Any] = {
            "num_attention_heads": 4,
            "attention_head_dim": 16,
            "in_channels": 16,
            "out_channels": 16,
            "num_layers": 2,
            "cross_attention_dim": 64,
            "audio_num_attention_heads": 4,
            "audio_attention_head_dim": 8,
            "audio_in_channels": 16,
            "audio_out_channels": 16,
            "audio_cross_attention_dim": 32,
            "av_ca_timestep_scale_multiplier": 1000,
        }
        defaults.update(overrides)
        return cls(**defaults)


def _check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}.")


def _parse_frequencies_precision(value: object) -> bool:
    if value in (None, "float32"):
        return False
    if value == "float64":
        return True
    raise ValueError(f"Checkpoint config frequencies_precision is {value!r}; expected 'float32' or 'float64'.")
