"""The audio VAE encoder (mel spectrogram -> latent), decoder (latent -> mel spectrogram) and `decode_audio`
(latent -> waveform).

Source: `ltx_core/model/audio_vae/audio_vae.py`. Keys mirror ltx-core's `AudioEncoder` / `AudioDecoder` state
dicts (`conv_in.conv.*`, `down.<level>.*` or `up.<level>.*`, `mid.block_1.*`, `norm_out.*`, `conv_out.conv.*`,
`per_channel_statistics.*`). `encode_audio` (waveform -> log-mel -> latent) is not ported here: its
waveform -> log-mel front end is a module of its own (`audio_processor.py`).
"""

from __future__ import annotations

from collections.abc import Collection

import jax
import jax.numpy as jnp
from flax import nnx, struct

from ltx_jax.model.audio_vae.attention import AttentionType, make_attn
from ltx_jax.model.audio_vae.causal_conv_2d import make_conv2d
from ltx_jax.model.audio_vae.causality_axis import CausalityAxis
from ltx_jax.model.audio_vae.downsample import build_downsampling_path
from ltx_jax.model.audio_vae.ops import PerChannelStatistics
from ltx_jax.model.audio_vae.resnet import ResnetBlock
from ltx_jax.model.audio_vae.upsample import build_upsampling_path
from ltx_jax.model.audio_vae.vocoder import Vocoder, VocoderWithBWE
from ltx_jax.model.common.normalization import NormType, build_normalization_layer

LATENT_DOWNSAMPLE_FACTOR = 4


@struct.dataclass
class Audio:
    """A waveform `(channels, samples)` (or `(B, channels, samples)` for B > 1) and its sample rate in Hz.

    A pytree whose only leaf is the waveform, so jitted functions can return it.
    """

    waveform: jax.Array
    sampling_rate: int = struct.field(pytree_node=False)


class MidBlock(nnx.Module):
    """`block_2(attn_1(block_1(x)))` at the lowest resolution; `attn_1` is an Identity without attention."""

    def __init__(
        self,
        channels: int,
        *,
        norm_type: NormType,
        causality_axis: CausalityAxis,
        attn_type: AttentionType,
        add_attention: bool,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        kw = {"norm_type": norm_type, "causality_axis": causality_axis, "rngs": rngs, "param_dtype": param_dtype}
        self.block_1 = ResnetBlock(in_channels=channels, out_channels=channels, **kw)
        attn_kw = {"attn_type": attn_type if add_attention else AttentionType.NONE, "norm_type": norm_type}
        self.attn_1 = make_attn(channels, **attn_kw, rngs=rngs, param_dtype=param_dtype)
        self.block_2 = ResnetBlock(in_channels=channels, out_channels=channels, **kw)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.block_2(self.attn_1(self.block_1(x)))


class AudioEncoder(nnx.Module):
    """Mel spectrogram `(B, in_channels, time, mel_bins)` -> normalized latent `(B, C, frames, latent_mel_bins)`.

    Each of the `len(ch_mult) - 1` downsamplings (2 in LTX-2: `LATENT_DOWNSAMPLE_FACTOR` 4) halves time
    and mel bins, rounding up along a HEIGHT or WIDTH causal axis and down otherwise: with HEIGHT,
    `frames = ceil(time / 4)`, so the decoder's `4 * frames - 3` recovers a `time = 4k + 1`. `conv_out`
    makes `2 * z_channels` channels with `double_z` (mean, log-variance) and `z_channels` without; like
    ltx-core, the first `ceil(channels / 2)` are kept (`C = z_channels` with `double_z`), then normalized
    by the per-channel statistics over the `C * latent_mel_bins` features of each frame (which must equal
    `ch`). `sample_rate`, `mel_hop_length`, `n_fft` and `mel_bins` describe the mel front end it expects.
    """

    def __init__(  # noqa: PLR0913 - ltx-core's keyword arguments
        self,
        *,
        ch: int,
        ch_mult: tuple[int, ...] = (1, 2, 4, 8),
        num_res_blocks: int,
        attn_resolutions: Collection[int],
        resamp_with_conv: bool = True,
        in_channels: int,
        resolution: int,
        z_channels: int,
        double_z: bool = True,
        attn_type: AttentionType = AttentionType.VANILLA,
        mid_block_add_attention: bool = True,
        norm_type: NormType = NormType.GROUP,
        causality_axis: CausalityAxis = CausalityAxis.WIDTH,
        sample_rate: int = 16000,
        mel_hop_length: int = 160,
        n_fft: int = 1024,
        is_causal: bool = True,
        mel_bins: int | None = 64,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        self.per_channel_statistics = PerChannelStatistics(latent_channels=ch, param_dtype=param_dtype)
        self.ch, self.in_channels, self.z_channels, self.double_z = ch, in_channels, z_channels, double_z
        self.sample_rate, self.mel_hop_length, self.n_fft = sample_rate, mel_hop_length, n_fft
        self.mel_bins, self.is_causal, self.causality_axis = mel_bins, is_causal, causality_axis
        kw = {"causality_axis": causality_axis, "rngs": rngs, "param_dtype": param_dtype}
        self.conv_in = make_conv2d(in_channels, ch, kernel_size=3, stride=1, **kw)
        self.down, block_in = build_downsampling_path(
            ch=ch,
            ch_mult=tuple(ch_mult),
            num_resolutions=len(ch_mult),
            num_res_blocks=num_res_blocks,
            resolution=resolution,
            norm_type=norm_type,
            attn_type=attn_type,
            attn_resolutions=attn_resolutions,
            resamp_with_conv=resamp_with_conv,
            **kw,
        )
        self.mid = MidBlock(
            block_in, norm_type=norm_type, attn_type=attn_type, add_attention=mid_block_add_attention, **kw
        )
        self.norm_out = build_normalization_layer(block_in, normtype=norm_type, param_dtype=param_dtype)
        self.conv_out = make_conv2d(block_in, 2 * z_channels if double_z else z_channels, kernel_size=3, **kw)

    def __call__(self, spectrogram: jax.Array) -> jax.Array:
        """spectrogram (B, in_channels, time, mel_bins) -> latent (B, C, frames, latent_mel_bins)."""
        if spectrogram.ndim != 4 or spectrogram.shape[1] != self.in_channels:
            raise ValueError(
                f"spectrogram has shape {spectrogram.shape}; the audio encoder takes (batch, {self.in_channels}, "
                f"time, mel_bins), a {self.in_channels}-channel mel spectrogram (config mel_bins: {self.mel_bins})."
            )
        h = self.conv_in(spectrogram)
        for stage in self.down:
            h = stage(h)
        h = self.conv_out(jax.nn.silu(self.norm_out(self.mid(h))))
        return self._normalize_latents(h, spectrogram.shape[3])

    def _normalize_latents(self, h: jax.Array, mel_bins: int) -> jax.Array:
        """h (B, channels, frames, f) -> (B, ceil(channels / 2), frames, f), `(x - mean) / std` per frame feature."""
        # torch.chunk(h, 2, dim=1)[0]: the first ceil(channels / 2), the mean half when double_z.
        means = h[:, : (h.shape[1] + 1) // 2]
        b, c, frames, f = means.shape
        if c * f != self.ch:
            raise ValueError(
                f"a spectrogram of {mel_bins} mel bins encodes to {c} channels x {f} mel bins = {c * f} features "
                f"per frame, but the per-channel statistics hold ch={self.ch}; pass a spectrogram whose mel bins "
                f"encode to {self.ch // c} (the config's mel_bins: {self.mel_bins})."
            )
        # ltx-core patchifies `b c t f -> b t (c f)` to apply the statistics, then unpatchifies.
        patched = jnp.transpose(means, (0, 2, 1, 3)).reshape(b, frames, c * f)
        patched = self.per_channel_statistics.normalize(patched)
        return jnp.transpose(patched.reshape(b, frames, c, f), (0, 2, 1, 3))


class AudioDecoder(nnx.Module):
    """Latent `(B, z_channels, frames, latent_mel_bins)` -> mel spectrogram `(B, out_ch, time, mel_bins)`.

    `time = 4 * frames - 3` when causal (`4 * frames` otherwise). Without `mel_bins` the output is
    cropped to `latent_mel_bins` frequency bins, as in ltx-core (checkpoints set it). Latents are
    un-normalized with the per-channel statistics first, over the `z_channels * latent_mel_bins`
    features of each frame (which must equal `ch`, as in ltx-core).
    """

    def __init__(  # noqa: PLR0913 - ltx-core's keyword arguments
        self,
        *,
        ch: int,
        out_ch: int,
        ch_mult: tuple[int, ...] = (1, 2, 4, 8),
        num_res_blocks: int,
        attn_resolutions: Collection[int],
        resolution: int,
        z_channels: int,
        norm_type: NormType = NormType.GROUP,
        causality_axis: CausalityAxis = CausalityAxis.WIDTH,
        mid_block_add_attention: bool = True,
        sample_rate: int = 16000,
        mel_hop_length: int = 160,
        is_causal: bool = True,
        mel_bins: int | None = None,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        self.per_channel_statistics = PerChannelStatistics(latent_channels=ch, param_dtype=param_dtype)
        self.ch, self.out_ch, self.z_channels, self.mel_bins = ch, out_ch, z_channels, mel_bins
        self.sample_rate, self.mel_hop_length, self.is_causal = sample_rate, mel_hop_length, is_causal
        self.causality_axis = causality_axis
        self.num_resolutions = len(ch_mult)
        base_channels = ch * ch_mult[-1]
        kw = {"causality_axis": causality_axis, "rngs": rngs, "param_dtype": param_dtype}
        self.conv_in = make_conv2d(z_channels, base_channels, kernel_size=3, stride=1, **kw)
        self.mid = MidBlock(
            base_channels,
            norm_type=norm_type,
            attn_type=AttentionType.VANILLA,
            add_attention=mid_block_add_attention,
            **kw,
        )
        self.up, final_channels = build_upsampling_path(
            ch=ch,
            ch_mult=tuple(ch_mult),
            num_resolutions=self.num_resolutions,
            num_res_blocks=num_res_blocks,
            resolution=resolution,
            norm_type=norm_type,
            attn_type=AttentionType.VANILLA,
            attn_resolutions=attn_resolutions,
            resamp_with_conv=True,
            initial_block_channels=base_channels,
            **kw,
        )
        self.norm_out = build_normalization_layer(final_channels, normtype=norm_type, param_dtype=param_dtype)
        self.conv_out = make_conv2d(final_channels, out_ch, kernel_size=3, stride=1, **kw)

    def __call__(self, sample: jax.Array) -> jax.Array:
        """sample (B, z_channels, frames, latent_mel_bins) -> (B, out_ch, time, mel_bins)."""
        self._check_latent(sample)
        b, c, frames, f = sample.shape
        # ltx-core patchifies `b c t f -> b t (c f)` to apply the statistics, then unpatchifies.
        patched = jnp.transpose(sample, (0, 2, 1, 3)).reshape(b, frames, c * f)
        patched = self.per_channel_statistics.un_normalize(patched)
        h = jnp.transpose(patched.reshape(b, frames, c, f), (0, 2, 1, 3))

        h = self.mid(self.conv_in(h))
        for level in reversed(range(self.num_resolutions)):
            h = self.up[level](h)
        h = self.conv_out(jax.nn.silu(self.norm_out(h)))
        return self._adjust_output_shape(h, self._target_frames(frames), f if self.mel_bins is None else self.mel_bins)

    def _check_latent(self, sample: jax.Array) -> None:
        if sample.ndim != 4 or sample.shape[1] != self.z_channels:
            raise ValueError(
                f"sample has shape {sample.shape}; the audio decoder takes (batch, {self.z_channels}, "
                "frames, mel_bins)."
            )
        features = sample.shape[1] * sample.shape[3]
        if features != self.ch:
            raise ValueError(
                f"sample has {sample.shape[1]} channels x {sample.shape[3]} mel bins = {features} features per "
                f"frame, but the per-channel statistics hold ch={self.ch}; pass a latent with "
                f"{self.ch // self.z_channels} mel bins."
            )

    def _target_frames(self, frames: int) -> int:
        target = frames * LATENT_DOWNSAMPLE_FACTOR
        if self.causality_axis != CausalityAxis.NONE:
            target = max(target - (LATENT_DOWNSAMPLE_FACTOR - 1), 1)
        return target

    def _adjust_output_shape(self, decoded: jax.Array, target_time: int, target_freq: int) -> jax.Array:
        """Crop, then zero-pad, (B, C, time, freq) to (B, out_ch, target_time, target_freq)."""
        decoded = decoded[:, : self.out_ch, :target_time, :target_freq]
        pad_time, pad_freq = target_time - decoded.shape[2], target_freq - decoded.shape[3]
        return jnp.pad(decoded, ((0, 0), (0, 0), (0, pad_time), (0, pad_freq)))


def decode_audio(latent: jax.Array, audio_decoder: AudioDecoder, vocoder: Vocoder | VocoderWithBWE) -> Audio:
    """Latent (B, z_channels, frames, latent_mel_bins) -> float32 `Audio` at `vocoder.output_sampling_rate`.

    The waveform is `(2, samples)` for B == 1 (ltx-core squeezes the batch axis) and `(B, 2, samples)` otherwise.
    """
    waveform = vocoder(audio_decoder(latent))
    if waveform.shape[0] == 1:
        waveform = waveform[0]
    return Audio(waveform=waveform.astype(jnp.float32), sampling_rate=vocoder.output_sampling_rate)
