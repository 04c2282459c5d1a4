"""Waveform -> log-mel front end of the audio VAE encoder, in numpy on the host.

Source: `ltx_core/model/audio_vae/ops.py::AudioProcessor`, which calls torchaudio: `functional.resample`
(sinc_interp_hann, lowpass_filter_width 6, rolloff 0.99) to the target rate, then
`transforms.MelSpectrogram(n_fft, win_length=n_fft, hop_length, f_min=0, f_max=rate/2, n_mels,
window_fn=hann_window, center=True, pad_mode="reflect", power=1.0, mel_scale="slaney", norm="slaney")`,
then `log(clamp(mel, min=1e-5))` laid out as (batch, channels, frames, mel bins). The torchaudio
algorithms are reproduced from its published source (`torchaudio/functional/functional.py`:
`_get_sinc_resample_kernel`, `_apply_sinc_resample_kernel`, `spectrogram`, `melscale_fbanks`,
`_hz_to_mel`, `_mel_to_hz`). It runs once per generation on a clip of seconds, so numpy in float64 is
both simple and cheap; torchaudio computes in the waveform's float32, which the outputs are returned in.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

LOWPASS_FILTER_WIDTH = 6  # torchaudio.functional.resample's defaults, which ltx-core keeps
ROLLOFF = 0.99
LOG_MEL_FLOOR = 1e-5  # ltx-core: log(clamp(mel, min=1e-5))
# A resampling kernel has (new/g) x (2 width + orig/g) taps for g = gcd(orig, new); rates that share
# little (44100 -> 16001) make it gigabytes, in torchaudio too. Refuse beyond this many taps.
MAX_RESAMPLE_KERNEL_TAPS = 1 << 24
_RESAMPLE_BLOCK_ELEMENTS = 1 << 20  # frames x taps per matmul of `_resample64`

# Slaney's mel scale (torchaudio `_hz_to_mel` / `_mel_to_hz`, mel_scale="slaney"): linear below 1 kHz,
# logarithmic above.
_SLANEY_F_SP = 200.0 / 3
_SLANEY_MIN_LOG_HZ = 1000.0
_SLANEY_MIN_LOG_MEL = _SLANEY_MIN_LOG_HZ / _SLANEY_F_SP
_SLANEY_LOGSTEP = math.log(6.4) / 27.0


def _sinc_resample_kernel(orig: int, new: int) -> tuple[np.ndarray, int]:
    """torchaudio's `_get_sinc_resample_kernel` (sinc_interp_hann) for gcd-reduced rates, in float64.

    Returns `(kernel, width)`: kernel `(new, 2 * width + orig)`, row j the filter of output phase j.
    """
    base_freq = min(orig, new) * ROLLOFF  # the low-pass cut-off, below both Nyquist rates
    width = math.ceil(LOWPASS_FILTER_WIDTH * orig / base_freq)
    taps = new * (2 * width + orig)
    if taps > MAX_RESAMPLE_KERNEL_TAPS:
        raise ValueError(
            f"Resampling with reduced rates {orig} -> {new} needs a {taps}-tap kernel, over the limit of "
            f"{MAX_RESAMPLE_KERNEL_TAPS}: convert the audio to a common rate first "
            "(e.g. `ffmpeg -i in.wav -ar 48000 out.wav`)."
        )
    idx = np.arange(-width, width + orig, dtype=np.float64)[None, :] / orig
    t = (np.arange(0, -new, -1, dtype=np.float64)[:, None] / new + idx) * base_freq
    t = np.clip(t, -LOWPASS_FILTER_WIDTH, LOWPASS_FILTER_WIDTH)
    window = np.cos(t * math.pi / LOWPASS_FILTER_WIDTH / 2) ** 2
    t *= math.pi
    # sin(t)/t with its limit 1 at t = 0; the inner where keeps the division from warning.
    sinc = np.where(t == 0, 1.0, np.sin(t) / np.where(t == 0, 1.0, t))
    return sinc * window * (base_freq / orig), width


def _resample64(waveform: np.ndarray, orig_rate: int, new_rate: int) -> np.ndarray:
    """`resample` in float64: `(..., samples)` -> `(..., ceil(new * samples / orig))`."""
    if orig_rate <= 0 or new_rate <= 0 or int(orig_rate) != orig_rate or int(new_rate) != new_rate:
        raise ValueError(f"Sample rates must be positive integers (Hz); got {orig_rate} -> {new_rate}: round them.")
    waveform = np.asarray(waveform, np.float64)
    if orig_rate == new_rate:
        return waveform
    gcd = math.gcd(int(orig_rate), int(new_rate))
    orig, new = int(orig_rate) // gcd, int(new_rate) // gcd
    kernel, width = _sinc_resample_kernel(orig, new)
    pad = [(0, 0)] * (waveform.ndim - 1) + [(width, width + orig)]
    padded = np.pad(waveform, pad)
    # torchaudio's conv1d with stride `orig` and `new` output channels: frame k, phase j gives output
    # sample k * new + j from the `2 width + orig` inputs starting at k * orig.
    frames = np.lib.stride_tricks.sliding_window_view(padded, kernel.shape[1], axis=-1)[..., ::orig, :]
    # In blocks of frames: materialized at once, the overlapping frames would take ~13x the input's
    # memory for a 3:1 decimation.
    step = max(1, _RESAMPLE_BLOCK_ELEMENTS // kernel.shape[1])
    blocks = [frames[..., i : i + step, :] @ kernel.T for i in range(0, frames.shape[-2], step)]
    out = np.concatenate(blocks, axis=-2).reshape(*waveform.shape[:-1], -1)
    # torchaudio takes the ceil of `torch.as_tensor(new * length / orig)`, a float32: past ~2^18 output
    # samples that rounds a quotient just above an integer down to it, one sample fewer than the exact ceil.
    return out[..., : math.ceil(np.float32(new * waveform.shape[-1] / orig))]


def resample(waveform: np.ndarray, orig_rate: int, new_rate: int) -> np.ndarray:
    """Band-limited resampling as `torchaudio.functional.resample(waveform, orig_rate, new_rate)`.

    waveform `(..., samples)` -> `(..., ceil(new * samples / orig))` float32, with `orig`, `new` the
    rates divided by their gcd and the quotient rounded to float32 first, as torchaudio does. Equal rates
    return the input as float32.
    """
    return _resample64(waveform, orig_rate, new_rate).astype(np.float32)


def _hz_to_mel_slaney(freq: np.ndarray) -> np.ndarray:
    freq = np.asarray(freq, np.float64)
    log_part = _SLANEY_MIN_LOG_MEL + np.log(np.maximum(freq, _SLANEY_MIN_LOG_HZ) / _SLANEY_MIN_LOG_HZ) / _SLANEY_LOGSTEP
    return np.where(freq >= _SLANEY_MIN_LOG_HZ, log_part, freq / _SLANEY_F_SP)


def _mel_to_hz_slaney(mels: np.ndarray) -> np.ndarray:
    log_part = _SLANEY_MIN_LOG_HZ * np.exp(_SLANEY_LOGSTEP * (mels - _SLANEY_MIN_LOG_MEL))
    return np.where(mels >= _SLANEY_MIN_LOG_MEL, log_part, _SLANEY_F_SP * mels)


def mel_filter_bank(n_freqs: int, f_min: float, f_max: float, n_mels: int, sample_rate: int) -> np.ndarray:
    """Slaney-scale, slaney-normalized triangular filters: `torchaudio.functional.melscale_fbanks(n_freqs,
    f_min, f_max, n_mels, sample_rate, norm="slaney", mel_scale="slaney")`, shape `(n_freqs, n_mels)`
    float64 (column m is mel band m; `magnitudes (..., n_freqs) @ bank` applies it)."""
    # torchaudio's bin frequencies use the integer Nyquist `sample_rate // 2`; kept for parity.
    all_freqs = np.linspace(0, sample_rate // 2, n_freqs)
    m_pts = np.linspace(_hz_to_mel_slaney(f_min), _hz_to_mel_slaney(f_max), n_mels + 2)
    f_pts = _mel_to_hz_slaney(m_pts)
    f_diff = np.diff(f_pts)
    slopes = f_pts[None, :] - all_freqs[:, None]  # (n_freqs, n_mels + 2)
    down_slopes = -slopes[:, :-2] / f_diff[:-1]
    up_slopes = slopes[:, 2:] / f_diff[1:]
    bank = np.maximum(0.0, np.minimum(down_slopes, up_slopes))
    # Slaney norm: each triangle divided by its width in Hz, for about equal energy per band.
    bank *= 2.0 / (f_pts[2:] - f_pts[:-2])[None, :]
    if (bank.max(axis=0) == 0.0).any():
        warnings.warn(
            f"A mel filter is all zeros: n_mels={n_mels} is too many for n_freqs={n_freqs} frequency bins; "
            "use fewer mel bins or a larger n_fft (torchaudio warns likewise).",
            stacklevel=2,
        )
    return bank


def _mel64(waveform: np.ndarray, sample_rate: int, n_fft: int, hop_length: int, n_mels: int) -> np.ndarray:
    """`mel_spectrogram` in float64 and frames-major: `(..., samples)` -> `(..., frames, n_mels)`."""
    waveform = np.asarray(waveform, np.float64)
    pad = n_fft // 2
    if waveform.shape[-1] <= pad:
        raise ValueError(
            f"The waveform has {waveform.shape[-1]} samples; the centred STFT reflect-pads {pad} on each side, "
            f"which needs at least {pad + 1} (n_fft // 2 + 1) samples: use a longer clip."
        )
    padded = np.pad(waveform, [(0, 0)] * (waveform.ndim - 1) + [(pad, pad)], mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(padded, n_fft, axis=-1)[..., ::hop_length, :]
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n_fft) / n_fft)  # torch.hann_window: periodic
    magnitude = np.abs(np.fft.rfft(frames * window, axis=-1))  # (..., frames, n_fft // 2 + 1)
    return magnitude @ mel_filter_bank(n_fft // 2 + 1, 0.0, sample_rate / 2.0, n_mels, sample_rate)


def mel_spectrogram(waveform: np.ndarray, sample_rate: int, n_fft: int, hop_length: int, n_mels: int) -> np.ndarray:
    """Magnitude mel spectrogram as ltx-core's `torchaudio.transforms.MelSpectrogram` (power 1.0).

    A centred STFT (reflect padding by `n_fft // 2`, periodic Hann window of `n_fft`, unnormalized,
    one-sided), magnitudes, then the slaney filters of `mel_filter_bank(n_fft // 2 + 1, 0, rate / 2, ...)`.
    waveform `(..., samples)` -> `(..., n_mels, 1 + samples // hop_length)` float32 (torchaudio's layout).
    """
    return np.swapaxes(_mel64(waveform, sample_rate, n_fft, hop_length, n_mels), -1, -2).astype(np.float32)


@dataclass(frozen=True)
class AudioProcessor:
    """The audio encoder's input: ltx-core's `AudioProcessor` (resample, mel, log), in numpy.

    The production audio VAE uses target_sample_rate 16000, mel_bins 64, mel_hop_length 160, n_fft 1024.
    """

    target_sample_rate: int
    mel_bins: int
    mel_hop_length: int
    n_fft: int

    def waveform_to_mel(self, waveform: np.ndarray, sample_rate: int) -> np.ndarray:
        """waveform `(B, C, samples)` at `sample_rate` -> log-mel `(B, C, frames, mel_bins)` float32,
        frames = 1 + resampled samples // mel_hop_length; `log(max(mel, 1e-5))` as ltx-core's
        `waveform_to_mel`."""
        waveform = np.asarray(waveform)
        if waveform.ndim != 3:
            raise ValueError(
                f"waveform_to_mel takes (batch, channels, samples); got shape {waveform.shape}: "
                "add the missing axes, e.g. `waveform[None]` for one (channels, samples) clip."
            )
        waveform = _resample64(waveform, sample_rate, self.target_sample_rate)
        mel = _mel64(waveform, self.target_sample_rate, self.n_fft, self.mel_hop_length, self.mel_bins)
        return np.log(np.maximum(mel, LOG_MEL_FLOOR)).astype(np.float32)
