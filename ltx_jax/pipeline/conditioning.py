"""Conditioning: an encoded image replaces latent frames or is appended as keyframe tokens; an
encoded reference video (IC-LoRA) is appended alongside the generated frames; an encoded reference audio
(Dub-It) is appended before the generated audio in time.

Source: `ltx_core/conditioning/types/latent_cond.py::VideoConditionByLatentIndex`,
`keyframe_cond.py::VideoConditionByKeyframeIndex` and `reference_video_cond.py::VideoConditionByReferenceLatent`
and `attention_strength_wrapper.py::ConditioningItemAttentionStrengthWrapper` with
`mask_utils.py` (how much the generated tokens and a conditioning's tokens attend to each other);
`ltx_pipelines/retake.py::TemporalRegionMask` (which time span of a given latent is generated again);
`reference_audio_cond.py::AudioConditionByReferenceLatent` with `ltx_pipelines/dubit.py`'s positions.
Applied to the patchified state before noise, host-side.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ltx_jax.pipeline.patchifiers import audio_positions, patchify_audio, patchify_video, video_positions
from ltx_jax.pipeline.types import AudioLatentShape, LatentState, VideoLatentShape

Conditioning = Callable[[LatentState, VideoLatentShape], LatentState]


def condition_by_latent_index(
    state: LatentState, latent: np.ndarray, strength: float, latent_idx: int, target: VideoLatentShape
) -> LatentState:
    """Puts `latent` `(B, C, F_c, H, W)` at latent frame `latent_idx` of the clean latent; its tokens keep
    `strength` of themselves (the noiser blends them in where the denoise mask is below 1)."""
    b, c, f, h, w = latent.shape
    if (b, c, h, w) != (target.batch, target.channels, target.height, target.width):
        raise ValueError(
            f"The conditioning latent has shape {latent.shape}; this generation's latent is {target.shape}. "
            "Encode the image at the generation's height and width."
        )
    if not 0 <= latent_idx or latent_idx + f > target.frames:
        raise ValueError(f"latent_idx={latent_idx} with {f} frame(s) does not fit {target.frames} latent frames.")
    _check_strength(strength)
    tokens = patchify_video(np.asarray(latent, np.asarray(state.latent).dtype))
    start = latent_idx * h * w
    stop = start + tokens.shape[1]
    out = {name: np.array(getattr(state, name)) for name in ("clean_latent", "denoise_mask")}
    out["clean_latent"][:, start:stop] = tokens
    out["denoise_mask"][:, start:stop] = 1.0 - strength
    return state.replace(**out)


def regenerate_time_span(state: LatentState, _: object, start_time: float, end_time: float) -> LatentState:
    """Generates the tokens whose `[start, end)` seconds overlap `[start_time, end_time)` and keeps the
    others (denoise mask 1 inside, 0 outside, as retake's `TemporalRegionMask`). Video and audio alike:
    both states' first position axis is seconds. An empty span keeps every token (a2vid's audio)."""
    bounds = np.asarray(state.positions)[:, 0]  # (B, T, 2)
    inside = (bounds[..., 1] > start_time) & (bounds[..., 0] < end_time)
    return state.replace(denoise_mask=inside[..., None].astype(np.float32))


def keep_all(state: LatentState, target: object) -> LatentState:
    """Every token kept as given (denoise mask 0): a2vid's input audio."""
    return regenerate_time_span(state, target, 0.0, 0.0)


def condition_by_keyframe(
    state: LatentState, keyframes: np.ndarray, frame_idx: int, strength: float, fps: float
) -> LatentState:
    """Appends `keyframes` `(B, C, F_k, H, W)`, an encoded image, as extra tokens placed at pixel frame
    `frame_idx`: they span that one pixel frame, `[frame_idx, frame_idx + 1)` (`num_pixel_frames=1`)."""
    _check_strength(strength)
    _no_attention_mask(state, "A keyframe")
    shape = VideoLatentShape(*keyframes.shape)
    tokens = patchify_video(np.asarray(keyframes, np.asarray(state.latent).dtype))
    # Pixel-space bounds, shifted to frame_idx; the causal first-frame fix applies only at frame 0.
    positions = video_positions(shape, fps=1.0, causal_fix=frame_idx == 0)
    positions[:, 0] += frame_idx
    positions[:, 0, :, 1] = positions[:, 0, :, 0] + 1
    positions[:, 0] /= np.float32(fps)
    return _appended(state, tokens, positions, strength)


def condition_by_reference_latent(
    state: LatentState, reference: np.ndarray, downscale_factor: int, strength: float, fps: float, noisy_tokens: int
) -> LatentState:
    """Appends the reference video's latent `(B, C, F, H, W)` as tokens at the generated frames' times;
    a reference encoded at 1/`downscale_factor` of the size has its pixel positions scaled back up.
    An existing attention mask grows with full attention to and from the first `noisy_tokens`
    (`with_attention_strength` sets other weights)."""
    _check_strength(strength)
    shape = VideoLatentShape(*reference.shape)
    tokens = patchify_video(np.asarray(reference, np.asarray(state.latent).dtype))
    positions = video_positions(shape, fps=fps, causal_fix=True)
    positions[:, 1:] *= np.float32(downscale_factor)
    attention = None
    if state.attention_mask is not None:
        attention = extended_attention_mask(state, 1.0, noisy_tokens, tokens.shape[1])
    return _appended(state, tokens, positions, strength, attention)


# Seconds between the end of Dub-It's reference audio and the generated audio's start (one audio latent frame).
REFERENCE_AUDIO_GAP = 0.04


def condition_by_audio_reference(state: LatentState, _: object, latent: np.ndarray) -> LatentState:
    """Appends an audio latent `(B, C, T, M)` as tokens kept as given (strength 1), placed before the generated
    audio in time: their positions shifted by minus the reference's duration and `REFERENCE_AUDIO_GAP`, so
    that RoPE sees them as what was said just before (`patchify_dubit_audio_reference_latent` with
    `negative_positions=True`, then `AudioConditionByReferenceLatent`)."""
    tokens = patchify_audio(np.asarray(latent, np.asarray(state.latent).dtype))
    positions = audio_positions(AudioLatentShape(*latent.shape))
    duration = positions[:, :, -1, 1].max()
    positions = positions - np.float32(duration) - np.float32(REFERENCE_AUDIO_GAP)  # float32 steps, as torch's
    return _appended(state, tokens, positions, 1.0)


def _appended(
    state: LatentState, tokens: np.ndarray, positions: np.ndarray, strength: float, attention: np.ndarray | None = None
) -> LatentState:
    """`state` with conditioning `tokens` at `positions` appended, kept at `strength`: the clean latent holds
    them, the latent zeros until the noiser blends them in; they are not marked as keyframes (given
    content, `extend_keyframes_mask(marked=False)`)."""
    mask = np.full((*tokens.shape[:2], 1), 1.0 - strength, np.float32)
    keyframes = None
    if state.keyframes_mask is not None:
        keyframes = np.concatenate([np.asarray(state.keyframes_mask), np.zeros_like(mask)], axis=1)
    return LatentState(
        latent=np.concatenate([np.asarray(state.latent), np.zeros_like(tokens)], axis=1),
        denoise_mask=np.concatenate([np.asarray(state.denoise_mask), mask], axis=1),
        positions=np.concatenate([np.asarray(state.positions), positions], axis=2),
        clean_latent=np.concatenate([np.asarray(state.clean_latent), tokens], axis=1),
        attention_mask=attention,
        keyframes_mask=keyframes,
    )


def with_attention_strength(condition: Conditioning, cross: float | np.ndarray) -> Conditioning:
    """`condition`, whose appended tokens and the generated tokens attend to each other with weight
    `cross` (a scalar, or one weight per new token `(M,)` / `(B|1, M)`); tokens appended by earlier
    conditionings and these ignore each other. Builds the state's `(B, T, T)` attention mask."""

    def apply(state: LatentState, target: VideoLatentShape) -> LatentState:
        # The inner item sees no mask: the one it would grow is replaced right after (it can be (T, T)).
        conditioned = condition(state.replace(attention_mask=None), target)
        new_tokens = conditioned.latent.shape[1] - state.latent.shape[1]
        if new_tokens == 0:
            return conditioned
        mask = extended_attention_mask(state, cross, target.token_count(), new_tokens)
        return conditioned.replace(attention_mask=mask)

    return apply


def extended_attention_mask(
    state: LatentState, cross: float | np.ndarray, noisy_tokens: int, new_tokens: int
) -> np.ndarray:
    """`build_attention_mask`: the state's mask (or all ones) grown by `new_tokens` that attend among
    themselves, to and from the first `noisy_tokens` with weight `cross`, and not to earlier additions."""
    batch, existing = state.latent.shape[:2]
    dtype = np.asarray(state.latent).dtype
    cross = _cross_weights(cross, new_tokens, batch).astype(dtype)
    mask = np.zeros((batch, existing + new_tokens, existing + new_tokens), dtype)
    mask[:, :existing, :existing] = 1.0 if state.attention_mask is None else np.asarray(state.attention_mask)
    mask[:, existing:, existing:] = 1.0
    mask[:, :noisy_tokens, existing:] = cross[:, None, :]
    mask[:, existing:, :noisy_tokens] = cross[:, :, None]
    return mask


def _cross_weights(cross: float | np.ndarray, new_tokens: int, batch: int) -> np.ndarray:
    """`resolve_cross_mask`: a scalar, `(M,)` or `(B|1, M)` weights as `(B, M)`."""
    weights = np.asarray(cross, np.float32)
    if weights.ndim == 0:
        return np.full((batch, new_tokens), weights, np.float32)
    if (
        weights.ndim > 2
        or weights.shape[-1] != new_tokens
        or (weights.ndim == 2 and weights.shape[0] not in (1, batch))
    ):
        raise ValueError(
            f"An attention-strength mask must be a scalar, ({new_tokens},) or ({batch} or 1, {new_tokens}) "
            f"for these {new_tokens} tokens; got shape {weights.shape}."
        )
    return np.broadcast_to(weights.reshape(-1, new_tokens), (batch, new_tokens))


def downsample_mask_to_latent(mask: np.ndarray, latent: VideoLatentShape) -> np.ndarray:
    """`ICLoraPipeline._downsample_mask_to_latent`: a pixel mask `(B, 1, F, H, W)` -> one weight per
    latent token `(B, F' * H' * W')`: area-averaged per frame, the first frame kept, the others
    averaged in groups of `(F - 1) / (F' - 1)` (the VAE's causal time compression)."""
    batch, _, frames = mask.shape[:3]
    pooled = _area_resize(np.asarray(mask, np.float32)[:, 0], latent.height, latent.width)  # (B, F, H', W')
    first = pooled[:, :1]
    if frames > 1 and latent.frames > 1:
        if (frames - 1) % (latent.frames - 1):
            raise ValueError(
                f"The attention mask's {frames} frames do not match the reference's {latent.frames} latent frames: "
                "give the mask video as many frames as the reference video."
            )
        group = (frames - 1) // (latent.frames - 1)
        rest = pooled[:, 1:].reshape(batch, latent.frames - 1, group, latent.height, latent.width).mean(axis=2)
        first = np.concatenate([first, rest], axis=1)
    return first.reshape(batch, -1)


def _area_resize(frames: np.ndarray, height: int, width: int) -> np.ndarray:
    """torch's `interpolate(mode="area")` (adaptive average pooling) over the last two axes."""

    def bounds(size: int, out: int) -> list[tuple[int, int]]:
        return [(i * size // out, -(-(i + 1) * size // out)) for i in range(out)]

    rows = np.stack([frames[..., a:b, :].mean(axis=-2) for a, b in bounds(frames.shape[-2], height)], axis=-2)
    return np.stack([rows[..., a:b].mean(axis=-1) for a, b in bounds(frames.shape[-1], width)], axis=-1)


def _no_attention_mask(state: LatentState, item: str) -> None:
    if state.attention_mask is not None:
        raise ValueError(
            f"{item} cannot follow a conditioning with an attention mask (the mask would not cover its tokens); "
            "apply the masked conditionings last."
        )


def _check_strength(strength: float) -> None:
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f"Conditioning strength must be in [0, 1] (1 keeps the image), got {strength}.")
