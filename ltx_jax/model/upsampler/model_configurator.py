"""Builds a `LatentUpsampler` from the `config` JSON in the upsampler checkpoint's metadata.

Source: `ltx_core/model/upsampler/model_configurator.py`. ltx-core 1.0.0 names the entry point
`from_config(config)`; upstream renamed it `from_metadata(metadata)`, reading `metadata["config"]`.
Both are here. Missing keys take ltx-core's defaults, as its configurator does; unlike it, an
unknown key raises, so a checkpoint of a different design is not built silently as this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.upsampler.model import LatentUpsampler

UPSAMPLER_DEFAULTS: dict[str, Any] = {
    "in_channels": 128,
    "mid_channels": 512,
    "num_blocks_per_stage": 4,
    "dims": 3,
    "spatial_upsample": True,
    "temporal_upsample": False,
    "spatial_scale": 2.0,
    "rational_resampler": False,
}
_IGNORED_KEYS = frozenset({"_class_name"})  # diffusers bookkeeping that the checkpoints carry


class LatentUpsamplerConfigurator:
    """`from_config(config, rngs=...)` -> a randomly initialized `LatentUpsampler`; load weights after."""

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], *, rngs: nnx.Rngs | None = None, param_dtype: jnp.dtype = jnp.float32
    ) -> LatentUpsampler:
        unknown = sorted(set(config) - set(UPSAMPLER_DEFAULTS) - _IGNORED_KEYS)
        if unknown:
            raise ValueError(
                f"upsampler config has unknown keys {unknown}; LatentUpsampler takes {sorted(UPSAMPLER_DEFAULTS)}."
            )
        kwargs = {key: config.get(key, default) for key, default in UPSAMPLER_DEFAULTS.items()}
        return LatentUpsampler(**kwargs, rngs=rngs or nnx.Rngs(0), param_dtype=param_dtype)

    @classmethod
    def from_metadata(
        cls, metadata: Mapping[str, Any], *, rngs: nnx.Rngs | None = None, param_dtype: jnp.dtype = jnp.float32
    ) -> LatentUpsampler:
        """Upstream's entry point: `metadata["config"]` is the parsed config (absent: all defaults)."""
        return cls.from_config(metadata.get("config", {}), rngs=rngs, param_dtype=param_dtype)
