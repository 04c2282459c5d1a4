"""Gemma hidden states -> text features: V1 (LTX-2 19B) and V2 (LTX-2.3 and later).

Source: `ltx_core/text_encoders/gemma/feature_extractor.py`, and `_create_feature_extractor` of
`ltx_core/text_encoders/gemma/encoders/encoder_configurator.py`.

V1 normalizes each sample and layer by its masked mean and range, `8 (x - mean) / range`, and
projects all layers with one `aggregate_embed` (no bias) whose output serves video and audio. V2
RMS-normalizes every token and layer, and projects with `video_aggregate_embed` and
`audio_aggregate_embed` (with bias) straight to the DiT's widths. The norms compute in float32
and return the input dtype (ltx-core computes them in the input dtype).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.normalization import linear

_EPS = 1e-6
# Transformer-config values that select V2; V1 checkpoints carry none of these keys.
V2_EXPECTED_CONFIG: dict[str, bool] = {
    "caption_proj_before_connector": True,
    "caption_projection_first_linear": False,
    "caption_proj_input_norm": False,
    "caption_projection_second_linear": False,
}


def stack_hidden_states(hidden_states: jax.Array | Sequence[jax.Array]) -> jax.Array:
    """A (B, T, D, L) array, or L arrays (B, T, D) (Gemma's per-layer outputs) stacked on the last axis."""
    encoded = jnp.stack(hidden_states, axis=-1) if isinstance(hidden_states, (list, tuple)) else hidden_states
    if encoded.ndim != 4:
        raise ValueError(
            f"hidden_states has shape {tuple(encoded.shape)}; expected (B, T, D, L) or a list of L (B, T, D) arrays."
        )
    return encoded


def norm_and_concat_padded_batch(encoded_text: jax.Array, attention_mask: jax.Array) -> jax.Array:
    """V1 norm: (B, T, D, L), binary mask (B, T) -> (B, T, D * L), padded tokens zero.

    Per sample and layer: `8 (x - mean) / (max - min + 1e-6)` over the valid tokens and D. Like
    upstream, the mask says which tokens are valid; ltx-core 1.0.0 rebuilt it from the lengths and
    `padding_side`, which is the same for every contiguously padded mask.
    """
    b, t, d, n_layers = encoded_text.shape
    x = encoded_text.astype(jnp.float32)
    valid = attention_mask.astype(bool)[:, :, None, None]
    denom = (attention_mask.astype(jnp.float32).sum(axis=-1) * d).reshape(b, 1, 1, 1)
    mean = jnp.where(valid, x, 0.0).sum(axis=(1, 2), keepdims=True) / (denom + _EPS)
    x_min = jnp.where(valid, x, jnp.inf).min(axis=(1, 2), keepdims=True)
    x_max = jnp.where(valid, x, -jnp.inf).max(axis=(1, 2), keepdims=True)
    normed = (8 * (x - mean) / (x_max - x_min + _EPS)).reshape(b, t, d * n_layers)
    return jnp.where(valid[:, :, :, 0], normed, 0.0).astype(encoded_text.dtype)


def norm_and_concat_per_token_rms(encoded_text: jax.Array, attention_mask: jax.Array) -> jax.Array:
    """V2 norm: (B, T, D, L), binary mask (B, T) -> (B, T, D * L), each (token, layer) RMS-normalized over D."""
    b, t, d, n_layers = encoded_text.shape
    x = encoded_text.astype(jnp.float32)
    normed = x * jax.lax.rsqrt(jnp.mean(x * x, axis=2, keepdims=True) + _EPS)
    normed = normed.reshape(b, t, d * n_layers)
    return jnp.where(attention_mask.astype(bool)[..., None], normed, 0.0).astype(encoded_text.dtype)


def rescale_norm(x: jax.Array, target_dim: int, source_dim: int) -> jax.Array:
    """`x * sqrt(target_dim / source_dim)`."""
    return x * math.sqrt(target_dim / source_dim)


class FeatureExtractorV1(nnx.Module):
    """19B: V1 norm -> `aggregate_embed` (D * L -> D, no bias); video and audio share the result."""

    def __init__(
        self,
        embedding_dim: int,
        num_layers: int,
        is_av: bool = False,
        *,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        self.is_av = is_av
        self.aggregate_embed = linear(
            embedding_dim * num_layers, embedding_dim, bias=False, rngs=rngs, param_dtype=param_dtype
        )

    def __call__(
        self, hidden_states: jax.Array | Sequence[jax.Array], attention_mask: jax.Array
    ) -> tuple[jax.Array, jax.Array | None]:
        """(B, T, D, L) hidden states, binary mask (B, T) -> video (B, T, D) and audio (the same, or None)."""
        encoded = stack_hidden_states(hidden_states)
        features = self.aggregate_embed(norm_and_concat_padded_batch(encoded, attention_mask))
        return features, (features if self.is_av else None)


class FeatureExtractorV2(nnx.Module):
    """2.3+: V2 norm -> rescale -> `video_aggregate_embed` (and `audio_aggregate_embed`), with bias."""

    def __init__(
        self,
        embedding_dim: int,
        num_layers: int,
        video_dim: int,
        audio_dim: int | None = None,
        *,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        flat_dim = embedding_dim * num_layers
        self.embedding_dim = embedding_dim
        self.video_aggregate_embed = linear(flat_dim, video_dim, rngs=rngs, param_dtype=param_dtype)
        self.audio_aggregate_embed = (
            None if audio_dim is None else linear(flat_dim, audio_dim, rngs=rngs, param_dtype=param_dtype)
        )

    def __call__(
        self, hidden_states: jax.Array | Sequence[jax.Array], attention_mask: jax.Array
    ) -> tuple[jax.Array, jax.Array | None]:
        """(B, T, D, L) hidden states, binary mask (B, T) -> video (B, T, video_dim), audio (B, T, audio_dim)/None."""
        normed = norm_and_concat_per_token_rms(stack_hidden_states(hidden_states), attention_mask)
        video_embed = self.video_aggregate_embed
        video = video_embed(rescale_norm(normed, video_embed.out_features, self.embedding_dim))
        audio = None
        if self.audio_aggregate_embed is not None:
            audio_embed = self.audio_aggregate_embed
            audio = audio_embed(rescale_norm(normed, audio_embed.out_features, self.embedding_dim))
        return video, audio


def create_feature_extractor(
    transformer_config: Mapping[str, Any],
    embedding_dim: int,
    num_layers: int,
    *,
    rngs: nnx.Rngs,
    param_dtype: jnp.dtype = jnp.float32,
) -> FeatureExtractorV1 | FeatureExtractorV2:
    """V1 when the checkpoint's transformer config has none of `V2_EXPECTED_CONFIG`'s keys, V2 when it
    has all of them with those values; anything else raises (a design we do not know).

    `embedding_dim` and `num_layers` are the Gemma hidden size and the number of stacked hidden
    states (layers + 1 for the embeddings): 3840 and 49 for Gemma 3 12B.
    """
    present = transformer_config.keys() & V2_EXPECTED_CONFIG.keys()
    if not present:
        return FeatureExtractorV1(embedding_dim, num_layers, is_av=True, rngs=rngs, param_dtype=param_dtype)
    missing = sorted(V2_EXPECTED_CONFIG.keys() - present)
    wrong = {k: transformer_config[k] for k in present if transformer_config[k] != V2_EXPECTED_CONFIG[k]}
    if missing or wrong:
        raise ValueError(
            f"transformer config is neither V1 (none of {sorted(V2_EXPECTED_CONFIG)}) nor V2 "
            f"({V2_EXPECTED_CONFIG}): missing {missing}, unexpected values {wrong}."
        )
    cfg = transformer_config
    return FeatureExtractorV2(
        embedding_dim,
        num_layers,
        video_dim=cfg["num_attention_heads"] * cfg["attention_head_dim"],
        audio_dim=cfg["audio_num_attention_heads"] * cfg["audio_attention_head_dim"],
        rngs=rngs,
        param_dtype=param_dtype,
    )
