"""The audio encoder's front end (`ltx_jax.model.audio_vae.audio_processor`) and audio file reading
(`ltx_jax.pipeline.audio_files`) against their references.

torchaudio cannot be installed beside this torch (PyPI's torchaudio pins another torch), so the resampler
and the mel filters are compared against torch transcriptions, written here, of torchaudio's published
source (`torchaudio/functional/functional.py`: `_get_sinc_resample_kernel` + `_apply_sinc_resample_kernel`,
`melscale_fbanks` with `_hz_to_mel`/`_mel_to_hz` slaney), computed in float32 as torchaudio computes them
for ltx-core's float32 waveforms; the STFT is `torch.stft` itself. Physical checks (a resampled sine is
the sine at the new rate; a tone peaks in the mel band centred on it) cannot share a bug with a
transcription. ltx-core's own `AudioProcessor.waveform_to_mel` runs on those transcriptions for the
plumbing (settings, clamp, log, axes). File reading is compared sample for sample with ltx-pipelines'
`decode_audio_from_file` on files written here with PyAV.
"""

import math
import types

import av
import numpy as np
import pytest
import torch
import torch.nn.functional as F  # noqa: N812 - torch's convention
from ltx_core_twin import relative_error
from tolerances import FLOAT32, MEL_FLOAT32_REFERENCE, RESAMPLE_FLOAT64, RESAMPLED_SINE
from torchaudio_stand_in import torchaudio_stand_in

from ltx_jax.model.audio_vae.audio_processor import AudioProcessor, mel_filter_bank, mel_spectrogram, resample
from ltx_jax.pipeline.audio_files import audio_duration, check_audio_file, read_audio

with torchaudio_stand_in():
    from ltx_core.model.audio_vae import ops as torch_ops
    from ltx_core.types import Audio
    from ltx_pipelines.utils.media_io import decode_audio_from_file

PRODUCTION = {"sample_rate": 16000, "n_fft": 1024, "hop_length": 160, "n_mels": 64}  # the LTX-2 audio VAE's
SMALL = {"sample_rate": 8000, "n_fft": 128, "hop_length": 32, "n_mels": 16}


def torch_hz_to_mel(freq: float) -> float:
    """torchaudio `_hz_to_mel(freq, "slaney")`."""
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, math.log(6.4) / 27.0
    if freq >= min_log_hz:
        return min_log_hz / f_sp + math.log(freq / min_log_hz) / logstep
    return freq / f_sp


def torch_mel_to_hz(mels: torch.Tensor) -> torch.Tensor:
    """torchaudio `_mel_to_hz(mels, "slaney")`."""
    f_sp, min_log_hz, logstep = 200.0 / 3, 1000.0, math.log(6.4) / 27.0
    min_log_mel = min_log_hz / f_sp
    freqs = f_sp * mels
    log_t = mels >= min_log_mel
    freqs[log_t] = min_log_hz * torch.exp(logstep * (mels[log_t] - min_log_mel))
    return freqs


def torch_melscale_fbanks(n_freqs: int, f_min: float, f_max: float, n_mels: int, sample_rate: int) -> torch.Tensor:
    """torchaudio `melscale_fbanks(..., norm="slaney", mel_scale="slaney")`: (n_freqs, n_mels) float32."""
    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs)
    m_pts = torch.linspace(torch_hz_to_mel(f_min), torch_hz_to_mel(f_max), n_mels + 2)
    f_pts = torch_mel_to_hz(m_pts)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    down_slopes = (-1.0 * slopes[:, :-2]) / f_diff[:-1]
    up_slopes = slopes[:, 2:] / f_diff[1:]
    fb = torch.max(torch.zeros(1), torch.min(down_slopes, up_slopes))
    return fb * (2.0 / (f_pts[2 : n_mels + 2] - f_pts[:n_mels])).unsqueeze(0)


def torch_mel_spectrogram(waveform: torch.Tensor, sample_rate: int, n_fft: int, hop_length: int, n_mels: int):
    """torchaudio `MelSpectrogram` as ltx-core configures it: (..., samples) -> (..., n_mels, frames)."""
    shape = waveform.shape
    spec = torch.stft(
        waveform.reshape(-1, shape[-1]),
        n_fft=n_fft,
        hop_length=hop_length,
        win_length=n_fft,
        window=torch.hann_window(n_fft, dtype=waveform.dtype),
        center=True,
        pad_mode="reflect",
        normalized=False,
        onesided=True,
        return_complex=True,
    ).abs()
    spec = spec.reshape(shape[:-1] + spec.shape[-2:])
    fb = torch_melscale_fbanks(n_fft // 2 + 1, 0.0, sample_rate / 2.0, n_mels, sample_rate).to(spec.dtype)
    return torch.matmul(spec.transpose(-1, -2), fb).transpose(-1, -2)


def torch_resample(waveform: torch.Tensor, orig_freq: int, new_freq: int, width_zeros: int = 6, rolloff: float = 0.99):
    """torchaudio `resample` (sinc_interp_hann): the kernel in the waveform's dtype, conv1d with stride."""
    gcd = math.gcd(orig_freq, new_freq)
    orig, new = orig_freq // gcd, new_freq // gcd
    base_freq = min(orig, new) * rolloff
    width = math.ceil(width_zeros * orig / base_freq)
    idx = torch.arange(-width, width + orig, dtype=waveform.dtype)[None, None] / orig
    t = torch.arange(0, -new, -1, dtype=waveform.dtype)[:, None, None] / new + idx
    t = (t * base_freq).clamp(-width_zeros, width_zeros)
    window = torch.cos(t * math.pi / width_zeros / 2) ** 2
    t = t * math.pi
    kernels = torch.where(t == 0, torch.tensor(1.0).to(t), t.sin() / t) * window * (base_freq / orig)
    shape = waveform.shape
    flat = waveform.reshape(-1, shape[-1])
    resampled = F.conv1d(F.pad(flat, (width, width + orig))[:, None], kernels, stride=orig)
    resampled = resampled.transpose(1, 2).reshape(flat.shape[0], -1)
    # torchaudio takes the ceil of a float32 tensor (torch.as_tensor of a Python float).
    target_length = torch.ceil(torch.as_tensor(new * shape[-1] / orig)).long()
    return resampled[..., :target_length].reshape(shape[:-1] + (-1,))


def tone_and_noise(sample_rate: int, seconds: float, channels: int = 2, seed: int = 0) -> np.ndarray:
    """(1, channels, samples) float32: a tone per channel (440 Hz, 3 kHz, 1234 Hz) plus white noise."""
    t = np.arange(round(sample_rate * seconds)) / sample_rate
    freqs = np.array([440.0, 3000.0, 1234.0])[:channels, None]
    noise = np.random.default_rng(seed).standard_normal((channels, t.size))
    return (0.5 * np.sin(2 * np.pi * freqs * t) + 0.05 * noise)[None].astype(np.float32)


@pytest.mark.parametrize("config", [PRODUCTION, SMALL], ids=["production", "small"])
def test_mel_spectrogram_matches_torch(config):
    waveform = tone_and_noise(config["sample_rate"], 1.0)
    ours = mel_spectrogram(waveform, **config)
    reference = torch_mel_spectrogram(torch.from_numpy(waveform), **config)
    assert ours.shape == tuple(reference.shape)
    assert ours.dtype == np.float32
    assert relative_error(ours, reference) <= FLOAT32


def test_mel_filter_bank_matches_torch():
    ours = mel_filter_bank(513, 0.0, 8000.0, 64, 16000)
    reference = torch_melscale_fbanks(513, 0.0, 8000.0, 64, 16000)
    assert ours.shape == (513, 64)
    assert relative_error(ours, reference) <= FLOAT32


@pytest.mark.parametrize("rates", [(44100, 16000), (48000, 16000), (8000, 16000)], ids=lambda r: f"{r[0]}->{r[1]}")
def test_resample_matches_torch(rates):
    """torchaudio builds the kernel in the waveform's float32 (5e-6 of the range off at 44.1 kHz); run in
    float64 the transcription agrees with this port to the float32 rounding of its output."""
    waveform = tone_and_noise(rates[0], 1.0)
    ours = resample(waveform, *rates)
    reference = torch_resample(torch.from_numpy(waveform), *rates)
    assert ours.shape == tuple(reference.shape)
    assert ours.dtype == np.float32
    assert relative_error(ours, reference) <= FLOAT32
    assert relative_error(ours, torch_resample(torch.from_numpy(waveform).double(), *rates).numpy()) <= RESAMPLE_FLOAT64


def test_resample_length_is_torchaudios_float32_ceil():
    # 160 * 700_082 / 441 = 253_998.0045...: float32 rounds it to the integer below, so torchaudio (and
    # this port) give one sample fewer than the exact ceil.
    length = 700_082
    assert math.ceil(160 * length / 441) == 253_999
    ours = resample(np.zeros((1, length), np.float32), 44100, 16000)
    reference = torch_resample(torch.zeros(1, length), 44100, 16000)
    assert ours.shape == tuple(reference.shape) == (1, 253_998)


def test_resampled_sine_is_the_sine_at_the_new_rate():
    """48 kHz -> 16 kHz of a 440 Hz sine is the 440 Hz sine sampled at 16 kHz, away from the edges (which the
    filter sees zero-padded)."""
    sine = np.sin(2 * np.pi * 440.0 * np.arange(48000) / 48000).astype(np.float32)
    ours = resample(sine, 48000, 16000)
    expected = np.sin(2 * np.pi * 440.0 * np.arange(16000) / 16000)
    assert ours.shape == (16000,)
    assert np.abs(ours - expected)[100:-100].max() <= RESAMPLED_SINE


def test_tone_peaks_in_the_mel_band_centred_nearest_it():
    """Slaney's scale by its definition: 15 mels at 1 kHz, 27 mels per ln(6.4) above; 66 points from 0 to
    8 kHz bound the 64 bands, whose centres are the inner 64."""
    mels_8k = 15.0 + 27.0 * math.log(8.0) / math.log(6.4)
    centres_mel = np.linspace(0.0, mels_8k, 66)[1:-1]
    centres_hz = np.where(centres_mel < 15.0, centres_mel * 200.0 / 3, 1000.0 * 6.4 ** ((centres_mel - 15.0) / 27.0))
    tone = np.sin(2 * np.pi * 1000.0 * np.arange(16000) / 16000)
    mel = mel_spectrogram(tone, **PRODUCTION)  # (64, frames)
    assert np.argmax(mel[:, 10:-10].mean(axis=1)) == np.argmin(np.abs(centres_hz - 1000.0))


@pytest.mark.parametrize("sample_rate", [44100, 16000])
def test_audio_processor_matches_ltx_core(sample_rate, monkeypatch):
    """ltx-core's `AudioProcessor` with the torch transcriptions standing in for torchaudio, run in float64
    and in float32 (production). Resampling 44.1 kHz in float32 moves torch's own log-mel by 2.5e-5 of its
    range from the float64 run (in the lowest mel bins), so the float32 comparison allows for that."""
    settings = {
        "sample_rate": 16000,
        "n_fft": 1024,
        "win_length": 1024,
        "hop_length": 160,
        "f_min": 0.0,
        "f_max": 8000.0,
        "n_mels": 64,
        "window_fn": torch.hann_window,
        "center": True,
        "pad_mode": "reflect",
        "power": 1.0,
        "mel_scale": "slaney",
        "norm": "slaney",
    }

    def mel_transform(**kwargs):
        assert kwargs == settings
        return lambda waveform: torch_mel_spectrogram(waveform, 16000, 1024, 160, 64)

    stand_in = types.SimpleNamespace(
        transforms=types.SimpleNamespace(MelSpectrogram=mel_transform),
        functional=types.SimpleNamespace(resample=torch_resample),
    )
    monkeypatch.setattr(torch_ops, "torchaudio", stand_in)
    reference_processor = torch_ops.AudioProcessor(
        target_sample_rate=16000, mel_bins=64, mel_hop_length=160, n_fft=1024
    )
    waveform = tone_and_noise(sample_rate, 1.0)
    ours = AudioProcessor(target_sample_rate=16000, mel_bins=64, mel_hop_length=160, n_fft=1024).waveform_to_mel(
        waveform, sample_rate
    )
    assert ours.shape == (1, 2, 101, 64)
    assert ours.dtype == np.float32
    for dtype, tolerance in [(torch.float64, FLOAT32), (torch.float32, MEL_FLOAT32_REFERENCE)]:
        audio = Audio(waveform=torch.from_numpy(waveform).to(dtype), sampling_rate=sample_rate)
        reference = reference_processor.waveform_to_mel(audio)
        assert reference.shape == ours.shape
        assert relative_error(ours, reference.numpy()) <= tolerance, dtype


def write_audio(path, codec: str, sample_rate: int, channels: int, seconds: float, video: bool = False):
    """Encode `tone_and_noise` at half scale with PyAV (plus a black 32x32 video track first if `video`)."""
    samples = 0.5 * tone_and_noise(sample_rate, seconds, channels)[0]
    layout = "stereo" if channels == 2 else "mono"
    with av.open(str(path), "w") as container:
        video_stream = container.add_stream("mpeg4", rate=25) if video else None
        stream = container.add_stream(codec, rate=sample_rate, layout=layout)
        if video_stream is not None:  # both streams exist before the first packet is muxed
            video_stream.width, video_stream.height, video_stream.pix_fmt = 32, 32, "yuv420p"
            for index in range(round(seconds * 25)):
                frame = av.VideoFrame.from_ndarray(np.zeros((32, 32, 3), np.uint8), format="rgb24")
                frame.pts = index
                container.mux(video_stream.encode(frame))
            container.mux(video_stream.encode(None))
        fmt = stream.codec_context.format
        frame_size = stream.codec_context.frame_size or 1000
        for start in range(0, samples.shape[1], frame_size):
            chunk = samples[:, start : start + frame_size]
            if fmt.name.startswith("s16"):
                chunk = np.round(chunk * 32767).astype(np.int16)
            elif fmt.name.startswith("s32"):
                chunk = np.round(chunk * 2147483647).astype(np.int32)
            elif fmt.name.startswith("u8"):
                chunk = np.round(chunk * 127 + 128).astype(np.uint8)
            chunk = chunk if fmt.is_planar else chunk.T.reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(chunk), format=fmt.name, layout=layout)
            frame.sample_rate, frame.pts = sample_rate, start
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))


FILES = {  # name: (codec, sample rate, channels, video track)
    "stereo_s16.wav": ("pcm_s16le", 44100, 2, False),
    "mono_s16.wav": ("pcm_s16le", 16000, 1, False),
    "stereo_aac.m4a": ("aac", 48000, 2, False),
    "stereo_mp3.mp3": ("libmp3lame", 44100, 2, False),
    "video_aac.mp4": ("aac", 48000, 2, True),
}
WINDOWS = [(0.0, None), (0.3, 0.5), (0.25, None), (0.0, 0.7), (1.2, 5.0)]  # (start_time, max_duration)


@pytest.fixture(scope="module")
def audio_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("audio")
    for name, (codec, sample_rate, channels, video) in FILES.items():
        write_audio(directory / name, codec, sample_rate, channels, 1.5, video)
    write_audio(directory / "mono_u8.wav", "pcm_u8", 8000, 1, 1.5)
    with av.open(str(directory / "silent.mp4"), "w") as container:  # a video without an audio track
        stream = container.add_stream("mpeg4", rate=25)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
        container.mux(stream.encode(av.VideoFrame.from_ndarray(np.zeros((32, 32, 3), np.uint8), format="rgb24")))
        container.mux(stream.encode(None))
    (directory / "garbage.wav").write_bytes(np.random.default_rng(0).bytes(5000))
    return directory


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"start{w[0]}_max{w[1]}")
@pytest.mark.parametrize("name", FILES)
def test_read_audio_matches_ltx_pipelines(audio_dir, name, window):
    waveform, sample_rate = read_audio(audio_dir / name, *window)
    reference = decode_audio_from_file(str(audio_dir / name), torch.device("cpu"), *window)
    assert sample_rate == reference.sampling_rate == FILES[name][1]
    assert waveform.dtype == np.float32
    assert waveform.shape[0] == FILES[name][2]
    assert np.array_equal(waveform, reference.waveform[0].numpy())
    check_audio_file(audio_dir / name, *window)


def test_read_audio_centres_unsigned_8_bit(audio_dir):
    """ltx-pipelines maps u8 PCM to [0, 2) (no offset); read_audio to [-1, 1), i.e. exactly 1 lower."""
    waveform, _ = read_audio(audio_dir / "mono_u8.wav", 0.2, 0.5)
    reference = decode_audio_from_file(str(audio_dir / "mono_u8.wav"), torch.device("cpu"), 0.2, 0.5)
    assert np.array_equal(waveform, reference.waveform[0].numpy() - 1.0)
    assert -0.3 < waveform.mean() < 0.3


def test_audio_duration(audio_dir):
    assert audio_duration(audio_dir / "stereo_s16.wav") == 1.5


@pytest.mark.parametrize("check", [read_audio, check_audio_file])
def test_audio_file_errors(audio_dir, check):
    wav = audio_dir / "stereo_s16.wav"
    with pytest.raises(FileNotFoundError, match="--audio-path .*missing.wav' does not exist"):
        check(audio_dir / "missing.wav")
    with pytest.raises(ValueError, match="--audio-path .*garbage.wav' cannot be decoded"):
        check(audio_dir / "garbage.wav")
    with pytest.raises(ValueError, match="--audio-path .*silent.mp4' has no audio stream .*video"):
        check(audio_dir / "silent.mp4")
    for start_time in (-0.5, math.nan, math.inf):
        with pytest.raises(ValueError, match="--audio-start-time must be a finite number of seconds >= 0"):
            check(wav, start_time)
    for max_duration in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="--audio-max-duration must be a finite number of seconds > 0"):
            check(wav, 0.0, max_duration)
    with pytest.raises(ValueError, match=r"--audio-max-duration 1e-06 s is under one sample at the audio's 44100 Hz"):
        check(wav, 0.0, 1e-6)
    for start_time in (1.5, 7.0):
        with pytest.raises(ValueError, match=r"--audio-start-time .* past the end .* lasts 1\.500 s"):
            check(wav, start_time)


def test_read_audio_start_past_the_end_of_an_mp3(audio_dir):
    """Nothing is decoded past the end of a compressed stream (which starts at 25 ms here); the error says why."""
    with pytest.raises(ValueError, match=r"--audio-start-time 3.0 s is at or past the end .* lasts 1\.5"):
        read_audio(audio_dir / "stereo_mp3.mp3", 3.0)


def test_read_audio_truncated_file(audio_dir, tmp_path):
    """An mp3 cut short of its header's length (its Xing frame count): nothing decodes from 1 s on, though the
    header says 1.5 s. (FFmpeg derives a wav's duration from the file size, so a cut wav would not do.)"""
    truncated = tmp_path / "truncated.mp3"
    truncated.write_bytes((audio_dir / "stereo_mp3.mp3").read_bytes()[:4000])
    check_audio_file(truncated, 1.0)  # the preflight trusts the header
    with pytest.raises(ValueError, match=r"--audio-path .*: no audio decoded from 1.0 s on, .* reports 1\.500 s"):
        read_audio(truncated, 1.0)


def test_processor_errors():
    with pytest.raises(ValueError, match=r"has 512 samples.*at least 513 \(n_fft // 2 \+ 1\)"):
        mel_spectrogram(np.zeros((1, 512)), **PRODUCTION)
    with pytest.raises(ValueError, match="over the limit of .* convert the audio to a common rate"):
        resample(np.zeros(10), 44100, 16001)
    with pytest.raises(ValueError, match=r"\(batch, channels, samples\); got shape \(2, 100\)"):
        AudioProcessor(16000, 64, 160, 1024).waveform_to_mel(np.zeros((2, 100)), 16000)
