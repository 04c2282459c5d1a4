"""The video VAE's choice of norm: `PixelNorm` or `torch.nn.GroupNorm` (both in `model/common`).

Source: `ltx_core/model/video_vae/normalization.py` (re-exports `ltx_core/model/common/normalization.py`)
and the `nn.GroupNorm` layers built in `resnet.py` / `video_vae.py`. Both compute in float32 and
return the input dtype (torch computes float32 inputs in float32; the upcast only matters for bf16).
"""

from __future__ import annotations

import jax.numpy as jnp

from ltx_jax.model.common.normalization import GroupNorm, PixelNorm
from ltx_jax.model.video_vae.enums import NormLayerType


def make_norm(
    norm_layer: NormLayerType, channels: int, *, groups: int, eps: float, param_dtype: jnp.dtype
) -> PixelNorm | GroupNorm:
    """The norm ltx-core builds for `norm_layer`: GroupNorm(groups, channels, eps) or PixelNorm (its own eps 1e-8)."""
    if norm_layer == NormLayerType.GROUP_NORM:
        return GroupNorm(groups, channels, eps=eps, param_dtype=param_dtype)
    return PixelNorm()
