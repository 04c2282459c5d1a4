"""LTX-2's audio VAE (encoder: mel -> latent; decoder: latent -> mel) and vocoders (mel -> waveform) as Flax
NNX modules.

One file per `ltx_core.model.audio_vae` file (the anti-aliasing part of `vocoder.py` is in
`anti_alias.py`); the norms of `ltx_core.model.common.normalization` are in
`ltx_jax/model/common/normalization.py`, shared with the video VAE and the upsampler.
The encoder takes a log-mel spectrogram, which `AudioProcessor` (`audio_processor.py`, numpy on the host)
computes from a waveform as ltx-core's does; `ltx_jax.pipeline.components.audio_encoder_callable` chains
them as ltx-core's `encode_audio`. See docs/audio.md.
"""

from ltx_jax.model.audio_vae.anti_alias import conv_transpose_1d
from ltx_jax.model.audio_vae.audio_processor import AudioProcessor, mel_spectrogram, resample
from ltx_jax.model.audio_vae.audio_vae import Audio, AudioDecoder, AudioEncoder, decode_audio
from ltx_jax.model.audio_vae.causality_axis import CausalityAxis
from ltx_jax.model.audio_vae.model_configurator import (
    audio_decoder_from_config,
    audio_decoder_state_dict,
    audio_encoder_from_config,
    audio_encoder_state_dict,
    vocoder_from_config,
    vocoder_state_dict,
)
from ltx_jax.model.audio_vae.ops import Buffer
from ltx_jax.model.audio_vae.vocoder import MelSTFT, Vocoder, VocoderWithBWE
from ltx_jax.model.common.normalization import NormType

__all__ = [
    "Audio",
    "AudioDecoder",
    "AudioEncoder",
    "AudioProcessor",
    "Buffer",
    "CausalityAxis",
    "MelSTFT",
    "NormType",
    "Vocoder",
    "VocoderWithBWE",
    "audio_decoder_from_config",
    "audio_decoder_state_dict",
    "audio_encoder_from_config",
    "audio_encoder_state_dict",
    "conv_transpose_1d",
    "decode_audio",
    "mel_spectrogram",
    "resample",
    "vocoder_from_config",
    "vocoder_state_dict",
]
