"""Gemma hidden states -> the DiT's video and audio text contexts: feature extractor + connectors.

Source: `ltx_core/text_encoders/gemma/embeddings_processor.py` (upstream main), plus the parts of
`encoders/encoder_configurator.py` that build it (`EmbeddingsProcessorConfigurator`) and rename
its checkpoint keys (`EMBEDDINGS_PROCESSOR_KEY_OPS`), which live there in ltx-core.

Like upstream, the processor first moves each sample's valid tokens to the front (a stable sort
on the mask), so the connectors see right padding whatever side the tokenizer padded. For left
padding (LTX's tokenizer) this is what ltx-core 1.0.0's connector did internally.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.attention_backends import AttentionFn, auto_attention
from ltx_jax.text_encoders.gemma.config import GEMMA3_HIDDEN_STATES
from ltx_jax.text_encoders.gemma.embeddings_connector import (
    AudioEmbeddings1DConnectorConfigurator,
    Embeddings1DConnector,
    Embeddings1DConnectorConfigurator,
)
from ltx_jax.text_encoders.gemma.feature_extractor import (
    FeatureExtractorV1,
    FeatureExtractorV2,
    create_feature_extractor,
)

# Checkpoint key prefix -> processor attribute prefix (ltx-core's EMBEDDINGS_PROCESSOR_KEY_OPS).
EMBEDDINGS_PROCESSOR_KEY_MAP: tuple[tuple[str, str], ...] = (
    ("text_embedding_projection.aggregate_embed.", "feature_extractor.aggregate_embed."),
    ("text_embedding_projection.video_aggregate_embed.", "feature_extractor.video_aggregate_embed."),
    ("text_embedding_projection.audio_aggregate_embed.", "feature_extractor.audio_aggregate_embed."),
    ("model.diffusion_model.video_embeddings_connector.", "video_connector."),
    ("model.diffusion_model.audio_embeddings_connector.", "audio_connector."),
)
# Video-only checkpoints (VIDEO_ONLY_EMBEDDINGS_PROCESSOR_KEY_OPS): one connector, no audio embed.
VIDEO_ONLY_EMBEDDINGS_PROCESSOR_KEY_MAP: tuple[tuple[str, str], ...] = (
    *EMBEDDINGS_PROCESSOR_KEY_MAP[:2],
    ("model.diffusion_model.embeddings_connector.", "video_connector."),
)


class EmbeddingsProcessorOutput(NamedTuple):
    video_encoding: jax.Array  # (B, S, video width)
    audio_encoding: jax.Array | None  # (B, S, audio width)
    attention_mask: jax.Array  # (B, S) binary, int32


def convert_to_additive_mask(attention_mask: jax.Array, dtype: jnp.dtype) -> jax.Array:
    """Binary (B, S) -> additive (B, 1, 1, S): 0 where valid, `-finfo(dtype).max` where padded."""
    additive = (attention_mask.astype(jnp.int32) - 1).astype(dtype) * jnp.finfo(dtype).max
    return additive.reshape(attention_mask.shape[0], 1, 1, attention_mask.shape[-1])


def compute_right_pad_order(additive_mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(B, 1, 1, S) additive mask -> (sort index (B, S) putting valid tokens first, the mask reordered)."""
    valid = (additive_mask[:, 0, 0, :] >= 0).astype(jnp.int32)
    sort_idx = jnp.argsort(1 - valid, axis=-1, stable=True)
    new_valid = jnp.take_along_axis(valid, sort_idx, axis=1)
    dtype = additive_mask.dtype
    new_additive = (new_valid.astype(dtype) - 1) * jnp.finfo(dtype).max
    return sort_idx, new_additive[:, None, None, :]


def apply_right_pad_order(features: jax.Array, sort_idx: jax.Array) -> jax.Array:
    """(B, S, D) features reordered along S by `compute_right_pad_order`'s index."""
    return jnp.take_along_axis(features, sort_idx[..., None], axis=1)


class EmbeddingsProcessor(nnx.Module):
    """Feature extractor + video connector + optional audio connector (ltx-core's attribute names)."""

    def __init__(
        self,
        *,
        feature_extractor: FeatureExtractorV1 | FeatureExtractorV2 | None = None,
        video_connector: Embeddings1DConnector,
        audio_connector: Embeddings1DConnector | None = None,
    ) -> None:
        self.feature_extractor = feature_extractor
        self.video_connector = video_connector
        self.audio_connector = audio_connector

    def create_embeddings(
        self,
        video_features: jax.Array,
        audio_features: jax.Array | None,
        additive_attention_mask: jax.Array,
        *,
        attention_fn: AttentionFn = auto_attention,
    ) -> tuple[jax.Array, jax.Array | None, jax.Array]:
        """Features (B, S, D) and the additive mask (B, 1, 1, S) -> video (B, S, Dv), audio, binary mask (B, S).

        Outputs are in right-padded order (each sample's valid tokens first, registers after).
        """
        if (self.audio_connector is None) != (audio_features is None):
            raise ValueError(
                "audio_features must be given exactly when the processor has an audio connector "
                f"(audio connector: {self.audio_connector is not None}, audio features: {audio_features is not None})."
            )
        sort_idx, mask_for_connector = compute_right_pad_order(additive_attention_mask)
        video_features = apply_right_pad_order(video_features, sort_idx)
        video_encoded, video_mask = self.video_connector(video_features, mask_for_connector, attention_fn=attention_fn)
        binary_mask = (video_mask[:, 0, 0, :] < 0.000001).astype(jnp.int32)
        video_encoded = video_encoded * binary_mask[..., None].astype(video_encoded.dtype)
        audio_encoded = None
        if self.audio_connector is not None:
            audio_features = apply_right_pad_order(audio_features, sort_idx)
            audio_encoded, _ = self.audio_connector(audio_features, mask_for_connector, attention_fn=attention_fn)
        return video_encoded, audio_encoded, binary_mask

    def process_hidden_states(
        self,
        hidden_states: jax.Array | Sequence[jax.Array],
        attention_mask: jax.Array,
        *,
        attention_fn: AttentionFn = auto_attention,
    ) -> EmbeddingsProcessorOutput:
        """Gemma hidden states (B, S, D, L) (or L arrays (B, S, D)) and the binary token mask (B, S)
        -> video context (B, S, Dv), audio context (B, S, Da) or None, binary mask (B, S).

        Works for left or right padding (ltx-core's `padding_side` argument is therefore gone).
        """
        if self.feature_extractor is None:
            raise ValueError("process_hidden_states needs a feature_extractor; use create_embeddings without one.")
        video_features, audio_features = self.feature_extractor(hidden_states, attention_mask)
        additive_mask = convert_to_additive_mask(attention_mask, video_features.dtype)
        video, audio, mask = self.create_embeddings(
            video_features, audio_features, additive_mask, attention_fn=attention_fn
        )
        return EmbeddingsProcessorOutput(video, audio, mask)


class EmbeddingsProcessorConfigurator:
    """`from_config(checkpoint config)` -> feature extractor (V1 or V2) + video and audio connectors.

    `embedding_dim` and `num_layers` describe the Gemma whose hidden states come in (its hidden
    size, and its layer count + 1); the default is Gemma 3 12B (3840, 49). Upstream reads them from
    the Gemma directory, since LTX-2.5 uses Gemma 4.
    """

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any],
        *,
        embedding_dim: int = GEMMA3_HIDDEN_STATES[0],
        num_layers: int = GEMMA3_HIDDEN_STATES[1],
        rngs: nnx.Rngs | None = None,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> EmbeddingsProcessor:
        rngs = rngs or nnx.Rngs(0)
        kw = {"rngs": rngs, "param_dtype": param_dtype}
        return EmbeddingsProcessor(
            feature_extractor=create_feature_extractor(config.get("transformer", {}), embedding_dim, num_layers, **kw),
            video_connector=Embeddings1DConnectorConfigurator.from_config(config, **kw),
            audio_connector=AudioEmbeddings1DConnectorConfigurator.from_config(config, **kw),
        )


def embeddings_processor_state_dict(state_dict: Mapping[str, Any], *, video_only: bool = False) -> dict[str, Any]:
    """The processor's tensors of a full checkpoint, renamed to `EmbeddingsProcessor` paths.

    Keeps only the keys under the prefixes of `EMBEDDINGS_PROCESSOR_KEY_MAP` (or the video-only
    map), so the result loads with `ltx_jax.load_state_dict(processor, result, prefix="")`.
    """
    table = VIDEO_ONLY_EMBEDDINGS_PROCESSOR_KEY_MAP if video_only else EMBEDDINGS_PROCESSOR_KEY_MAP
    out = {}
    for key, value in state_dict.items():
        for source, target in table:
            if key.startswith(source):
                out[target + key[len(source) :]] = value
                break
    return out
