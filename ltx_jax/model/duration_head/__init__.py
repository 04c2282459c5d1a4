"""LTX-2.5's duration head (seconds from the text connectors' outputs)."""

from ltx_jax.model.duration_head.duration_head import (
    DURATION_HEAD_PREFIX,
    DurationHead,
    duration_head_from_config,
    duration_head_state_dict,
)

__all__ = ["DURATION_HEAD_PREFIX", "DurationHead", "duration_head_from_config", "duration_head_state_dict"]
