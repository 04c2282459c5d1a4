"""Vocoders: mel spectrogram -> stereo waveform.

Source: `ltx_core/model/audio_vae/vocoder.py`.
- `Vocoder` with `resblock="1"`: HiFi-GAN (the 19B model, 24 kHz).
- `Vocoder` with `resblock="AMP1"`: BigVGAN v2 (anti-aliased Snake/SnakeBeta activations).
- `VocoderWithBWE` (2.3+): a BigVGAN v2 vocoder, then bandwidth extension to 48 kHz: a causal
  log-mel of its output feeds a second BigVGAN generator whose residual is added to a sinc-resampled
  copy. It runs in float32 whatever the parameter or input dtype, as upstream does.
The anti-aliasing filters live in `anti_alias.py`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from ltx_jax.model.audio_vae.anti_alias import Activation1d, ConvTranspose1d, Snake, SnakeBeta, UpSample1d
from ltx_jax.model.audio_vae.ops import Buffer
from ltx_jax.model.audio_vae.resnet import LRELU_SLOPE, ResBlock1
from ltx_jax.model.conv import Conv, conv_nd

STEREO_MEL_CHANNELS = 128  # every production vocoder takes 2 stereo channels x 64 mel bins
POST_LRELU_SLOPE = 0.01  # HiFi-GAN's final `torch.nn.LeakyReLU()` keeps torch's default slope
LOG_MEL_FLOOR = 1e-5


def get_padding(kernel_size: int, dilation: int = 1) -> int:
    """The symmetric padding that keeps a dilated odd-kernel convolution's length."""
    return int((kernel_size * dilation - dilation) / 2)


class AMPBlock1(nnx.Module):
    """BigVGAN v2 block: three `x += c2(a2(c1(a1(x))))` steps with anti-aliased Snake(Beta) activations."""

    def __init__(
        self,
        channels: int,
        kernel_size: int = 3,
        dilation: tuple[int, int, int] = (1, 3, 5),
        activation: str = "snake",
        *,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        act_cls = SnakeBeta if activation == "snakebeta" else Snake

        def conv(d: int) -> Conv:
            pad = get_padding(kernel_size, d)
            return Conv(
                channels, channels, kernel_size, ndim=1, dilation=d, padding=pad, rngs=rngs, param_dtype=param_dtype
            )

        self.convs1 = nnx.List([conv(d) for d in dilation[:3]])
        self.convs2 = nnx.List([conv(1) for _ in range(3)])
        self.acts1 = nnx.List([Activation1d(act_cls(channels, param_dtype=param_dtype)) for _ in range(3)])
        self.acts2 = nnx.List([Activation1d(act_cls(channels, param_dtype=param_dtype)) for _ in range(3)])

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, C, T) -> (B, C, T)."""
        for c1, c2, a1, a2 in zip(self.convs1, self.convs2, self.acts1, self.acts2, strict=True):
            x = x + c2(a2(c1(a1(x))))
        return x


class Vocoder(nnx.Module):
    """Mel `(B, 2, T, 64)` -> waveform `(B, 2, T * prod(upsample_rates))` at `output_sampling_rate`.

    Keys: `conv_pre`, `ups.<i>` (transposed convs, weight (in, out, k)), `resblocks.<i * n_kernels + j>`,
    `act_post` (BigVGAN only), `conv_post`. Arguments are the checkpoint's `config.vocoder` values.
    """

    def __init__(  # noqa: PLR0913 - ltx-core's keyword arguments
        self,
        resblock_kernel_sizes: list[int] | None = None,
        upsample_rates: list[int] | None = None,
        upsample_kernel_sizes: list[int] | None = None,
        resblock_dilation_sizes: list[list[int]] | None = None,
        upsample_initial_channel: int = 1024,
        resblock: str = "1",
        output_sampling_rate: int = 24000,
        activation: str = "snake",
        use_tanh_at_final: bool = True,
        apply_final_activation: bool = True,
        use_bias_at_final: bool = True,
        *,
        rngs: nnx.Rngs,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        if resblock not in ("1", "AMP1"):
            raise ValueError(f"resblock={resblock!r} is not supported; use '1' (HiFi-GAN) or 'AMP1' (BigVGAN v2).")
        kernel_sizes = [3, 7, 11] if resblock_kernel_sizes is None else list(resblock_kernel_sizes)
        rates = [6, 5, 2, 2, 2] if upsample_rates is None else list(upsample_rates)
        up_kernels = [16, 15, 8, 4, 4] if upsample_kernel_sizes is None else list(upsample_kernel_sizes)
        dilations = [[1, 3, 5]] * 3 if resblock_dilation_sizes is None else list(resblock_dilation_sizes)
        self.output_sampling_rate = output_sampling_rate
        self.num_kernels, self.num_upsamples = len(kernel_sizes), len(rates)
        self.use_tanh_at_final, self.apply_final_activation = use_tanh_at_final, apply_final_activation
        self.is_amp = resblock == "AMP1"
        kw = {"rngs": rngs, "param_dtype": param_dtype}
        self.conv_pre = Conv(STEREO_MEL_CHANNELS, upsample_initial_channel, 7, ndim=1, padding=3, **kw)
        self.ups = nnx.List(
            [
                ConvTranspose1d(
                    upsample_initial_channel // 2**i,
                    upsample_initial_channel // 2 ** (i + 1),
                    k,
                    stride=s,
                    padding=(k - s) // 2,
                    **kw,
                )
                for i, (s, k) in enumerate(zip(rates, up_kernels, strict=True))
            ]
        )
        blocks = []
        for i in range(len(rates)):
            ch = upsample_initial_channel // 2 ** (i + 1)
            for k, d in zip(kernel_sizes, dilations, strict=True):
                blocks.append(
                    AMPBlock1(ch, k, d, activation=activation, **kw) if self.is_amp else ResBlock1(ch, k, d, **kw)
                )
        self.resblocks = nnx.List(blocks)
        final_channels = upsample_initial_channel // 2 ** len(rates)
        if self.is_amp:
            self.act_post = Activation1d(SnakeBeta(final_channels, param_dtype=param_dtype))
        self.conv_post = Conv(final_channels, 2, 7, ndim=1, padding=3, bias=use_bias_at_final, **kw)

    def __call__(self, x: jax.Array) -> jax.Array:
        """x (B, 2, T, 64) stereo mel -> (B, 2, samples)."""
        if x.ndim != 4 or x.shape[1] * x.shape[3] != STEREO_MEL_CHANNELS or x.shape[1] != 2:
            raise ValueError(
                f"x has shape {x.shape}; the vocoder takes a stereo mel spectrogram (batch, 2, time, "
                f"{STEREO_MEL_CHANNELS // 2}) as the audio decoder returns it."
            )
        b, s, t, m = x.shape
        x = jnp.transpose(x, (0, 1, 3, 2)).reshape(b, s * m, t)  # b s t c -> b (s c) t
        x = self.conv_pre(x)
        for i in range(self.num_upsamples):
            if not self.is_amp:
                x = jax.nn.leaky_relu(x, LRELU_SLOPE)
            x = self.ups[i](x)
            # Every block of a stage sees the same input; their outputs are averaged.
            start = i * self.num_kernels
            x = jnp.stack([self.resblocks[j](x) for j in range(start, start + self.num_kernels)]).mean(axis=0)
        x = self.act_post(x) if self.is_amp else jax.nn.leaky_relu(x, POST_LRELU_SLOPE)
        x = self.conv_post(x)
        if self.apply_final_activation:
            x = jnp.tanh(x) if self.use_tanh_at_final else jnp.clip(x, -1, 1)
        return x


class _STFTFn(nnx.Module):
    """Causal STFT as a strided conv with the checkpoint's DFT x Hann bases (`forward_basis`, `inverse_basis`).

    The bases are zeros until loaded, as in ltx-core: the checkpoint's exact (bfloat16) bases are what
    the BWE generator was trained on. `inverse_basis` is loaded but unused.
    """

    def __init__(self, filter_length: int, hop_length: int, win_length: int, *, param_dtype: jnp.dtype) -> None:
        self.hop_length, self.win_length = hop_length, win_length
        n_freqs = filter_length // 2 + 1
        self.forward_basis = Buffer(jnp.zeros((n_freqs * 2, 1, filter_length), param_dtype))
        self.inverse_basis = Buffer(jnp.zeros((n_freqs * 2, 1, filter_length), param_dtype))

    def __call__(self, y: jax.Array) -> tuple[jax.Array, jax.Array]:
        """y (B, T) -> magnitude, phase (B, n_freqs, T_frames); frame t sees samples up to its end only."""
        y = y[:, None, :]
        y = jnp.pad(y, ((0, 0), (0, 0), (max(0, self.win_length - self.hop_length), 0)))
        spec = conv_nd(y, self.forward_basis[...], stride=self.hop_length)
        n_freqs = spec.shape[1] // 2
        real, imag = spec[:, :n_freqs], spec[:, n_freqs:]
        magnitude = jnp.sqrt(real**2 + imag**2)
        phase = jnp.arctan2(imag.astype(jnp.float32), real.astype(jnp.float32)).astype(real.dtype)
        return magnitude, phase


class MelSTFT(nnx.Module):
    """Causal log-mel spectrogram.

    Keys: `mel_basis` (n_mels, n_freqs), `stft_fn.forward_basis`, `stft_fn.inverse_basis`.
    """

    def __init__(
        self,
        filter_length: int,
        hop_length: int,
        win_length: int,
        n_mel_channels: int,
        *,
        param_dtype: jnp.dtype = jnp.float32,
    ) -> None:
        self.stft_fn = _STFTFn(filter_length, hop_length, win_length, param_dtype=param_dtype)
        self.mel_basis = Buffer(jnp.zeros((n_mel_channels, filter_length // 2 + 1), param_dtype))

    def mel_spectrogram(self, y: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
        """y (B, T) -> log_mel (B, n_mels, F), magnitude (B, n_freqs, F), phase (B, n_freqs, F), energy (B, F)."""
        magnitude, phase = self.stft_fn(y)
        energy = jnp.sqrt(jnp.sum(magnitude**2, axis=1))
        precision = jax.lax.Precision.HIGHEST if magnitude.dtype == jnp.float32 else None
        mel = jnp.einsum("mf,bft->bmt", self.mel_basis[...].astype(magnitude.dtype), magnitude, precision=precision)
        return jnp.log(jnp.maximum(mel, LOG_MEL_FLOOR)), magnitude, phase, energy


class VocoderWithBWE(nnx.Module):
    """Mel `(B, 2, T, 64)` -> waveform `(B, 2, samples)` at `output_sampling_rate`, clipped to [-1, 1].

    Keys: `vocoder.*`, `bwe_generator.*`, `mel_stft.*`. The sinc resampler's filter is computed, not loaded.
    """

    def __init__(
        self,
        vocoder: Vocoder,
        bwe_generator: Vocoder,
        mel_stft: MelSTFT,
        input_sampling_rate: int,
        output_sampling_rate: int,
        hop_length: int,
    ) -> None:
        self.vocoder, self.bwe_generator, self.mel_stft = vocoder, bwe_generator, mel_stft
        self.input_sampling_rate, self.output_sampling_rate = input_sampling_rate, output_sampling_rate
        self.hop_length = hop_length
        self.resampler = UpSample1d(
            ratio=output_sampling_rate // input_sampling_rate, persistent=False, window_type="hann"
        )

    def _compute_mel(self, audio: jax.Array) -> jax.Array:
        """audio (B, C, T) -> log-mel (B, C, n_mels, T_frames)."""
        b, c, _ = audio.shape
        mel, _, _, _ = self.mel_stft.mel_spectrogram(audio.reshape(b * c, -1))
        return mel.reshape(b, c, mel.shape[1], mel.shape[2])

    def __call__(self, mel_spec: jax.Array) -> jax.Array:
        """mel_spec (B, 2, T, 64) -> (B, 2, samples) in mel_spec's dtype, computed in float32."""
        x = self.vocoder(mel_spec.astype(jnp.float32))
        length_low_rate = x.shape[-1]
        output_length = length_low_rate * self.output_sampling_rate // self.input_sampling_rate
        # Zero-pad to a whole number of hops, so the mel has exactly length / hop frames.
        remainder = length_low_rate % self.hop_length
        if remainder:
            x = jnp.pad(x, ((0, 0), (0, 0), (0, self.hop_length - remainder)))
        residual = self.bwe_generator(jnp.swapaxes(self._compute_mel(x), 2, 3))
        skip = self.resampler(x)
        if residual.shape != skip.shape:
            raise ValueError(
                f"BWE residual {residual.shape} != resampled skip {skip.shape}: the BWE generator's upsample rates "
                f"must multiply to hop_length * output/input rate = {self.hop_length * self.resampler.ratio}."
            )
        return jnp.clip(residual + skip, -1, 1)[..., :output_length].astype(mel_spec.dtype)
