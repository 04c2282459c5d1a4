"""Checkpoint config -> video VAE modules, and checkpoint keys -> module keys.

Source: `ltx_core/model/video_vae/model_configurator.py` (`VideoEncoderConfigurator`,
`VideoDecoderConfigurator`, `VAE_{ENCODER,DECODER}_COMFY_KEYS_FILTER`). The defaults are ltx-core's:
note the decoder pads with "reflect" and is timestep-conditioned unless the config says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.video_vae.conv_video_decoder import VideoDecoder
from ltx_jax.model.video_vae.enums import LogVarianceType, NormLayerType, PaddingModeType
from ltx_jax.model.video_vae.ops import MEAN_KEY, STD_KEY
from ltx_jax.model.video_vae.video_vae import VideoEncoder

_CONV_VAE_CLASS_NAME = "CausalVideoAutoencoder"
_STATISTICS = "per_channel_statistics."


def _enum(enum: type, config: dict[str, Any], key: str, default: str) -> Any:  # noqa: ANN401 - an enum member
    value = config.get(key, default)
    try:
        return enum(value)
    except ValueError:
        valid = ", ".join(repr(m.value) for m in enum)
        raise ValueError(f"vae.{key}={value!r} is not valid; use one of {valid}.") from None


def _vae_section(config: Mapping[str, Any]) -> dict[str, Any]:
    """The checkpoint's parsed `config` JSON ({"vae": {...}, ...}) -> its `vae` dict, checked."""
    if not isinstance(config, Mapping):
        raise TypeError(f"config must be the checkpoint's parsed `config` dict, got {type(config).__name__}.")
    vae = dict(config.get("vae", {}))
    class_name = vae.get("_class_name", _CONV_VAE_CLASS_NAME)
    if class_name != _CONV_VAE_CLASS_NAME:
        raise ValueError(
            f"vae._class_name={class_name!r}: only the convolutional {_CONV_VAE_CLASS_NAME!r} is ported "
            "(LTX-2.5's diffusion decoder is not)."
        )
    if vae.get("dims", 3) != 3:
        raise ValueError(f"vae.dims={vae['dims']!r}: only 3-D convolutions (dims=3, every LTX-2 VAE) are ported.")
    return vae


def video_encoder_from_config(
    config: Mapping[str, Any], *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32
) -> VideoEncoder:
    """`VideoEncoderConfigurator.from_config`: the checkpoint's `config` dict -> a `VideoEncoder`."""
    vae = _vae_section(config)
    return VideoEncoder(
        in_channels=vae.get("in_channels", 3),
        out_channels=vae.get("latent_channels", 128),
        encoder_blocks=vae.get("encoder_blocks", []),
        patch_size=vae.get("patch_size", 4),
        norm_layer=_enum(NormLayerType, vae, "norm_layer", "pixel_norm"),
        latent_log_var=_enum(LogVarianceType, vae, "latent_log_var", "uniform"),
        encoder_spatial_padding_mode=_enum(PaddingModeType, vae, "spatial_padding_mode", "zeros"),
        rngs=rngs,
        param_dtype=param_dtype,
    )


def video_decoder_from_config(
    config: Mapping[str, Any], *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32
) -> VideoDecoder:
    """`VideoDecoderConfigurator.from_config`: the checkpoint's `config` dict -> a `VideoDecoder`."""
    vae = _vae_section(config)
    return VideoDecoder(
        in_channels=vae.get("latent_channels", 128),
        out_channels=vae.get("out_channels", 3),
        decoder_blocks=vae.get("decoder_blocks", []),
        patch_size=vae.get("patch_size", 4),
        norm_layer=_enum(NormLayerType, vae, "norm_layer", "pixel_norm"),
        causal=vae.get("causal_decoder", False),
        timestep_conditioning=vae.get("timestep_conditioning", True),
        decoder_spatial_padding_mode=_enum(PaddingModeType, vae, "spatial_padding_mode", "reflect"),
        base_channels=vae.get("decoder_base_channels", 128),
        rngs=rngs,
        param_dtype=param_dtype,
    )


def _select(state_dict: Mapping[str, Any], part: str) -> dict[str, Any]:
    """ltx-core's VAE key filter for `part` ("encoder" / "decoder"): `vae.<part>.k` or bare `<part>.k` -> `k`,
    `[vae.]per_channel_statistics.k` -> `per_channel_statistics.k`; every other key is dropped.

    Only the two statistics the model uses are kept: LTX-Video-era files also carry e.g.
    `mean-of-stds`, which ltx-core's non-strict load ignores.
    """
    used = {_STATISTICS + STD_KEY, _STATISTICS + MEAN_KEY}
    selected: dict[str, Any] = {}
    for key, value in state_dict.items():
        name = key.removeprefix("vae.")
        if name.startswith(part + "."):
            selected[name.removeprefix(part + ".")] = value
        elif name in used:
            selected[name] = value
    return selected


def vae_encoder_state_dict(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """Checkpoint tensors -> `VideoEncoder` keys (load with `ltx_jax.load_state_dict(encoder, sd, prefix="")`)."""
    return _select(state_dict, "encoder")


def vae_decoder_state_dict(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """Checkpoint tensors -> `VideoDecoder` keys (load with `ltx_jax.load_state_dict(decoder, sd, prefix="")`)."""
    return _select(state_dict, "decoder")
