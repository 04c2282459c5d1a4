"""Builders from a checkpoint's `config` JSON, and the checkpoint-key selections, for the audio encoder,
decoder and vocoders.

Source: `ltx_core/model/audio_vae/model_configurator.py`. The builders read the same keys with the
same defaults as `AudioEncoderConfigurator` / `AudioDecoderConfigurator` / `VocoderConfigurator` (1.0.0's
`from_config(config)`; upstream's `from_metadata` reads the same dict from `metadata["config"]`). The
selections mirror `AUDIO_VAE_ENCODER_COMFY_KEYS_FILTER`, `AUDIO_VAE_DECODER_COMFY_KEYS_FILTER` and
`VOCODER_COMFY_KEYS_FILTER`:

    encoder = audio_encoder_from_config(config, rngs=nnx.Rngs(0))
    ltx_jax.load_state_dict(encoder, audio_encoder_state_dict(checkpoint), prefix="")
    decoder = audio_decoder_from_config(config, rngs=nnx.Rngs(0))
    ltx_jax.load_state_dict(decoder, audio_decoder_state_dict(checkpoint), prefix="")
    vocoder = vocoder_from_config(config, rngs=nnx.Rngs(0))
    ltx_jax.load_state_dict(vocoder, vocoder_state_dict(checkpoint), prefix="")
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any, TypeVar

import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.audio_vae.attention import AttentionType
from ltx_jax.model.audio_vae.audio_vae import AudioDecoder, AudioEncoder
from ltx_jax.model.audio_vae.causality_axis import CausalityAxis
from ltx_jax.model.audio_vae.vocoder import MelSTFT, Vocoder, VocoderWithBWE
from ltx_jax.model.common.normalization import NormType

ENCODER_PREFIX = "audio_vae.encoder."
DECODER_PREFIX = "audio_vae.decoder."
STATISTICS_PREFIX = "audio_vae.per_channel_statistics."
VOCODER_PREFIX = "vocoder."

_E = TypeVar("_E", bound=Enum)


def check_config_value(config: Mapping[str, Any], key: str, expected: Any, section: str) -> None:  # noqa: ANN401
    """ltx-core's `check_config_value`: the architectures we build need `config[key] == expected`."""
    if config.get(key) != expected:
        raise ValueError(
            f"config {section}.{key} is {config.get(key)!r}; ltx-core (and ltx-jax) only build {expected!r} there."
        )


def _enum(cls: type[_E], section: str, key: str, value: Any) -> _E:  # noqa: ANN401
    try:
        return cls(value)
    except ValueError:
        choices = [m.value for m in cls]
        raise ValueError(f"config {section}.{key} is {value!r}; use one of {choices}.") from None


def audio_encoder_from_config(
    config: Mapping[str, Any], *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32
) -> AudioEncoder:
    """`AudioEncoderConfigurator.from_config`: the checkpoint's `config` JSON -> `AudioEncoder`.

    ddconfig's `dropout` is read by ltx-core but only acts in training, so it is not read here."""
    audio_vae_cfg = config.get("audio_vae", {})
    model_params = audio_vae_cfg.get("model", {}).get("params", {})
    ddconfig = model_params.get("ddconfig", {})
    preprocessing = audio_vae_cfg.get("preprocessing", {})
    stft_cfg = preprocessing.get("stft", {})
    section = "audio_vae.model.params.ddconfig"
    return AudioEncoder(
        ch=ddconfig.get("ch", 128),
        ch_mult=tuple(ddconfig.get("ch_mult", (1, 2, 4))),
        num_res_blocks=ddconfig.get("num_res_blocks", 2),
        attn_resolutions=ddconfig.get("attn_resolutions", {8, 16, 32}),
        resolution=ddconfig.get("resolution", 256),
        z_channels=ddconfig.get("z_channels", 8),
        double_z=ddconfig.get("double_z", True),
        resamp_with_conv=ddconfig.get("resamp_with_conv", True),
        in_channels=ddconfig.get("in_channels", 2),
        attn_type=_enum(AttentionType, section, "attn_type", ddconfig.get("attn_type", "vanilla")),
        mid_block_add_attention=ddconfig.get("mid_block_add_attention", True),
        norm_type=_enum(NormType, section, "norm_type", ddconfig.get("norm_type", "pixel")),
        causality_axis=_enum(CausalityAxis, section, "causality_axis", ddconfig.get("causality_axis", "height")),
        sample_rate=model_params.get("sampling_rate", 16000),
        mel_hop_length=stft_cfg.get("hop_length", 160),
        n_fft=stft_cfg.get("filter_length", 1024),
        is_causal=stft_cfg.get("causal", True),
        mel_bins=_mel_bins(audio_vae_cfg),
        rngs=rngs,
        param_dtype=param_dtype,
    )


def _mel_bins(audio_vae_cfg: Mapping[str, Any]) -> int | None:
    """ltx-core's lookup order: ddconfig, then the mel preprocessing, then the variables section."""
    return (
        audio_vae_cfg.get("model", {}).get("params", {}).get("ddconfig", {}).get("mel_bins")
        or audio_vae_cfg.get("preprocessing", {}).get("mel", {}).get("n_mel_channels")
        or audio_vae_cfg.get("variables", {}).get("mel_bins")
    )


def audio_decoder_from_config(
    config: Mapping[str, Any], *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32
) -> AudioDecoder:
    """`AudioDecoderConfigurator.from_config`: the checkpoint's `config` JSON -> `AudioDecoder`."""
    audio_vae_cfg = config.get("audio_vae", {})
    model_params = audio_vae_cfg.get("model", {}).get("params", {})
    ddconfig = model_params.get("ddconfig", {})
    preprocessing = audio_vae_cfg.get("preprocessing", {})
    stft_cfg = preprocessing.get("stft", {})
    section = "audio_vae.model.params.ddconfig"
    return AudioDecoder(
        ch=ddconfig.get("ch", 128),
        out_ch=ddconfig.get("out_ch", 2),
        ch_mult=tuple(ddconfig.get("ch_mult", (1, 2, 4))),
        num_res_blocks=ddconfig.get("num_res_blocks", 2),
        attn_resolutions=ddconfig.get("attn_resolutions", {8, 16, 32}),
        resolution=ddconfig.get("resolution", 256),
        z_channels=ddconfig.get("z_channels", 8),
        norm_type=_enum(NormType, section, "norm_type", ddconfig.get("norm_type", "pixel")),
        causality_axis=_enum(CausalityAxis, section, "causality_axis", ddconfig.get("causality_axis", "height")),
        mid_block_add_attention=ddconfig.get("mid_block_add_attention", True),
        sample_rate=model_params.get("sampling_rate", 16000),
        mel_hop_length=stft_cfg.get("hop_length", 160),
        is_causal=stft_cfg.get("causal", True),
        mel_bins=_mel_bins(audio_vae_cfg),
        rngs=rngs,
        param_dtype=param_dtype,
    )


def _vocoder_from_config(
    cfg: Mapping[str, Any],
    *,
    apply_final_activation: bool = True,
    output_sampling_rate: int | None = None,
    rngs: nnx.Rngs,
    param_dtype: jnp.dtype,
) -> Vocoder:
    return Vocoder(
        resblock_kernel_sizes=cfg.get("resblock_kernel_sizes", [3, 7, 11]),
        upsample_rates=cfg.get("upsample_rates", [6, 5, 2, 2, 2]),
        upsample_kernel_sizes=cfg.get("upsample_kernel_sizes", [16, 15, 8, 4, 4]),
        resblock_dilation_sizes=cfg.get("resblock_dilation_sizes", [[1, 3, 5], [1, 3, 5], [1, 3, 5]]),
        upsample_initial_channel=cfg.get("upsample_initial_channel", 1024),
        resblock=cfg.get("resblock", "1"),
        output_sampling_rate=(
            output_sampling_rate if output_sampling_rate is not None else cfg.get("output_sampling_rate", 24000)
        ),
        activation=cfg.get("activation", "snake"),
        use_tanh_at_final=cfg.get("use_tanh_at_final", True),
        apply_final_activation=apply_final_activation,
        use_bias_at_final=cfg.get("use_bias_at_final", True),
        rngs=rngs,
        param_dtype=param_dtype,
    )


def vocoder_from_config(
    config: Mapping[str, Any], *, rngs: nnx.Rngs, param_dtype: jnp.dtype = jnp.float32
) -> Vocoder | VocoderWithBWE:
    """`VocoderConfigurator.from_config`: a flat `config.vocoder` (19B) builds the HiFi-GAN `Vocoder`;
    a nested one with `vocoder` and `bwe` sections (2.3+) builds `VocoderWithBWE`."""
    cfg = config.get("vocoder", {})
    if "bwe" not in cfg:
        check_config_value(cfg, "resblock", "1", "vocoder")
        check_config_value(cfg, "stereo", True, "vocoder")
        return _vocoder_from_config(cfg, rngs=rngs, param_dtype=param_dtype)
    vocoder_cfg, bwe_cfg = cfg.get("vocoder", {}), cfg["bwe"]
    for section, sub in (("vocoder.vocoder", vocoder_cfg), ("vocoder.bwe", bwe_cfg)):
        check_config_value(sub, "resblock", "AMP1", section)
        check_config_value(sub, "stereo", True, section)
        check_config_value(sub, "activation", "snakebeta", section)
    kw = {"rngs": rngs, "param_dtype": param_dtype}
    vocoder = _vocoder_from_config(vocoder_cfg, output_sampling_rate=bwe_cfg["input_sampling_rate"], **kw)
    bwe_generator = _vocoder_from_config(
        bwe_cfg, apply_final_activation=False, output_sampling_rate=bwe_cfg["output_sampling_rate"], **kw
    )
    mel_stft = MelSTFT(
        filter_length=bwe_cfg["n_fft"],
        hop_length=bwe_cfg["hop_length"],
        win_length=bwe_cfg["n_fft"],
        n_mel_channels=bwe_cfg["num_mels"],
        param_dtype=param_dtype,
    )
    return VocoderWithBWE(
        vocoder=vocoder,
        bwe_generator=bwe_generator,
        mel_stft=mel_stft,
        input_sampling_rate=bwe_cfg["input_sampling_rate"],
        output_sampling_rate=bwe_cfg["output_sampling_rate"],
        hop_length=bwe_cfg["hop_length"],
    )


def _audio_vae_state_dict(checkpoint: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    selected = {}
    for key, value in checkpoint.items():
        if key.startswith(prefix):
            selected[key.removeprefix(prefix)] = value
        elif key.startswith(STATISTICS_PREFIX):
            selected["per_channel_statistics." + key.removeprefix(STATISTICS_PREFIX)] = value
    return selected


def audio_encoder_state_dict(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """The `AudioEncoder` keys of a checkpoint: `audio_vae.encoder.X` -> `X`,
    `audio_vae.per_channel_statistics.X` -> `per_channel_statistics.X`; everything else is dropped."""
    return _audio_vae_state_dict(checkpoint, ENCODER_PREFIX)


def audio_decoder_state_dict(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """The `AudioDecoder` keys of a checkpoint: `audio_vae.decoder.X` -> `X`,
    `audio_vae.per_channel_statistics.X` -> `per_channel_statistics.X`; everything else is dropped."""
    return _audio_vae_state_dict(checkpoint, DECODER_PREFIX)


def vocoder_state_dict(checkpoint: Mapping[str, Any]) -> dict[str, Any]:
    """The vocoder keys of a checkpoint with `vocoder.` stripped once (`vocoder.vocoder.conv_pre.weight`
    of a BWE checkpoint -> `vocoder.conv_pre.weight`); everything else is dropped."""
    return {k.removeprefix(VOCODER_PREFIX): v for k, v in checkpoint.items() if k.startswith(VOCODER_PREFIX)}
