"""Conditioning: an encoded image replaces latent frames or is appended as keyframe tokens; an
encoded reference video (IC-LoRA) is appended alongside the generated frames.

Source: `ltx_core/conditioning/types/latent_cond.py::VideoConditionByLatentIndex`,
`keyframe_cond.py::VideoConditionByKeyframeIndex` and `reference_video_cond.py::VideoConditionByReferenceLatent`
(without an attention-strength wrapper, which needs no attention mask). Applied to the patchified
state before noise, host-side.
"""

from __future__ import annotations

import numpy as np

from ltx_jax.pipeline.patchifiers import patchify_video, video_positions
from ltx_jax.pipeline.types import LatentState, VideoLatentShape


def condition_by_latent_index(
    state: LatentState, latent: np.ndarray, strength: float, latent_idx: int, target: VideoLatentShape
) -> LatentState:
    """Puts `latent` `(B, C, F_c, H, W)` at latent frame `latent_idx`; its tokens keep `strength` of themselves."""
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
    out = {name: np.array(getattr(state, name)) for name in ("latent", "clean_latent", "denoise_mask")}
    out["latent"][:, start:stop] = tokens
    out["clean_latent"][:, start:stop] = tokens
    out["denoise_mask"][:, start:stop] = 1.0 - strength
    return state.replace(**out)


def condition_by_keyframe(
    state: LatentState, keyframes: np.ndarray, frame_idx: int, strength: float, fps: float
) -> LatentState:
    """Appends `keyframes` `(B, C, F_k, H, W)` as extra tokens placed at pixel frame `frame_idx`."""
    _check_strength(strength)
    shape = VideoLatentShape(*keyframes.shape)
    tokens = patchify_video(np.asarray(keyframes, np.asarray(state.latent).dtype))
    # Pixel-space bounds, shifted to frame_idx; the causal first-frame fix applies only at frame 0.
    positions = video_positions(shape, fps=1.0, causal_fix=frame_idx == 0)
    positions[:, 0] = (positions[:, 0] + frame_idx) / np.float32(fps)
    mask = np.full((*tokens.shape[:2], 1), 1.0 - strength, np.float32)
    return LatentState(
        latent=np.concatenate([np.asarray(state.latent), tokens], axis=1),
        denoise_mask=np.concatenate([np.asarray(state.denoise_mask), mask], axis=1),
        positions=np.concatenate([np.asarray(state.positions), positions], axis=2),
        clean_latent=np.concatenate([np.asarray(state.clean_latent), tokens], axis=1),
    )


def condition_by_reference_latent(
    state: LatentState, reference: np.ndarray, downscale_factor: int, strength: float, fps: float
) -> LatentState:
    """Appends the reference video's latent `(B, C, F, H, W)` as tokens at the generated frames' times;
    a reference encoded at 1/`downscale_factor` of the size has its pixel positions scaled back up."""
    _check_strength(strength)
    shape = VideoLatentShape(*reference.shape)
    tokens = patchify_video(np.asarray(reference, np.asarray(state.latent).dtype))
    positions = video_positions(shape, fps=fps, causal_fix=True)
    positions[:, 1:] *= np.float32(downscale_factor)
    mask = np.full((*tokens.shape[:2], 1), 1.0 - strength, np.float32)
    return LatentState(
        latent=np.concatenate([np.asarray(state.latent), tokens], axis=1),
        denoise_mask=np.concatenate([np.asarray(state.denoise_mask), mask], axis=1),
        positions=np.concatenate([np.asarray(state.positions), positions], axis=2),
        clean_latent=np.concatenate([np.asarray(state.clean_latent), tokens], axis=1),
    )


def _check_strength(strength: float) -> None:
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f"Conditioning strength must be in [0, 1] (1 keeps the image), got {strength}.")
