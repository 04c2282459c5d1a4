"""The axis along which the audio VAE's convolutions are causal.

Source: `ltx_core/model/audio_vae/causality_axis.py`. The values are the strings a checkpoint's
`ddconfig.causality_axis` holds; `NONE` (value `None`) means symmetric padding.
"""

from enum import Enum


class CausalityAxis(Enum):
    """Axis of a `(B, C, H=time, W=frequency)` tensor that convolutions are causal along."""

    NONE = None
    WIDTH = "width"
    HEIGHT = "height"
    WIDTH_COMPATIBILITY = "width-compatibility"
