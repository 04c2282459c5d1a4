"""ltx-jax's audio input path against the real torchaudio and ltx-core's `encode_audio` (issue #22).

CPU CI cannot install torchaudio beside its torch, so the tests compare the mel front end with
`torch.stft` and torchaudio's published formulas. The H200 image has torch and torchaudio 2.11: this
script compares, on the same waveforms,
- `resample` with `torchaudio.functional.resample` (44.1, 48, 22.05 and 8 kHz -> 16 kHz);
- `mel_spectrogram` with `torchaudio.transforms.MelSpectrogram` at the audio VAE's settings;
- the whole path, `AudioProcessor` + our `AudioEncoder`, with ltx-core's `encode_audio` (its own
  `AudioProcessor` on torchaudio, its `AudioEncoder`) at the production audio VAE config
  (scripts/make_synthetic_checkpoint.py's), random weights, float32 on the CPU on both sides, and
  our encoder in bf16 on the GPU against that float32 reference;
- the time of both in bf16 on the GPU for a 20 s stereo 44.1 kHz clip (median of 5, after one warm-up).
Prints one JSON object.

    PYTHONPATH=/tmp/site:$PWD python benchmarks/audio_against_torchaudio.py > out.json
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import torch
import torchaudio
from flax import nnx

import ltx_jax
from ltx_jax.model import audio_vae
from ltx_jax.model.audio_vae.audio_processor import AudioProcessor, mel_spectrogram, resample

ROOT = pathlib.Path(__file__).resolve().parents[1]


def relative_error(ours: np.ndarray, reference: torch.Tensor) -> float:
    reference = reference.detach().double().cpu().numpy()
    return float(np.abs(np.asarray(ours, np.float64) - reference).max() / np.abs(reference).max())


def production_config() -> dict:
    sys.path.insert(0, str(ROOT / "scripts"))
    import make_synthetic_checkpoint  # noqa: PLC0415 - a script beside ours, not a package

    return {"audio_vae": make_synthetic_checkpoint.SECTIONS["audio_vae"]}


def waveform(rate: int, seconds: float, seed: int = 0) -> np.ndarray:
    """A stereo tone pair plus noise, (2, samples) float32 in [-1, 1]."""
    t = np.arange(int(rate * seconds)) / rate
    rng = np.random.default_rng(seed)
    tones = np.stack([np.sin(2 * np.pi * 440 * t), 0.5 * np.sin(2 * np.pi * 3000 * t + 1.0)])
    return (0.6 * tones + 0.1 * rng.standard_normal(tones.shape)).astype(np.float32)


def front_end() -> dict:
    results = {}
    for rate in (44100, 48000, 22050, 8000):
        clip = waveform(rate, 3.0)
        expected = torchaudio.functional.resample(torch.from_numpy(clip), rate, 16000)
        ours = resample(clip, rate, 16000)
        results[f"resample_{rate}_to_16000"] = relative_error(ours, expected) if ours.shape == expected.shape else (
            f"shape {ours.shape} vs {tuple(expected.shape)}"
        )  # fmt: skip
    clip = waveform(16000, 3.0)
    transform = torchaudio.transforms.MelSpectrogram(
        sample_rate=16000, n_fft=1024, win_length=1024, hop_length=160, f_min=0.0, f_max=8000.0, n_mels=64,
        window_fn=torch.hann_window, center=True, pad_mode="reflect", power=1.0, mel_scale="slaney", norm="slaney",
    )  # fmt: skip
    results["mel_spectrogram_16k"] = relative_error(
        mel_spectrogram(clip, 16000, 1024, 160, 64), transform(torch.from_numpy(clip))
    )
    return results


def encoder_pair(config: dict) -> tuple[torch.nn.Module, audio_vae.AudioEncoder]:
    from ltx_core.model.audio_vae import AudioEncoderConfigurator  # noqa: PLC0415

    torch.manual_seed(0)
    reference = AudioEncoderConfigurator.from_config(config).eval()
    with torch.no_grad():  # the statistics are torch.empty in 1.0.0: give them real values
        reference.per_channel_statistics.get_buffer("std-of-means").copy_(0.5 + torch.rand(128))
        reference.per_channel_statistics.get_buffer("mean-of-means").copy_(0.3 * torch.randn(128))
    tensors = {
        ("audio_vae." if k.startswith("per_channel_statistics.") else "audio_vae.encoder.") + k: v
        for k, v in reference.state_dict().items()
    }
    ours = nnx.eval_shape(lambda: audio_vae.audio_encoder_from_config(config, rngs=nnx.Rngs(0)))
    ltx_jax.load_state_dict(ours, audio_vae.audio_encoder_state_dict(tensors), prefix="")
    return reference, ours


def our_encode_audio(
    encoder: nnx.Module, dtype: jnp.dtype, device: jax.Device
) -> Callable[[np.ndarray, int], np.ndarray]:
    """`(clip (2, samples), rate)` -> latent: our front end on the host, the encoder jitted once on `device`."""
    processor = AudioProcessor(encoder.sample_rate, encoder.mel_bins, encoder.mel_hop_length, encoder.n_fft)
    state = jax.tree.map(
        lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x,
        jax.device_put(nnx.state(encoder), device),
    )
    graphdef = nnx.graphdef(encoder)
    run = jax.jit(lambda state, mel: nnx.merge(graphdef, state)(mel))

    def encode(clip: np.ndarray, rate: int) -> np.ndarray:
        mel = jax.device_put(jnp.asarray(processor.waveform_to_mel(clip[None], rate), dtype), device)
        return np.asarray(run(state, mel).astype(jnp.float32))

    return encode


def encoder_parity(config: dict) -> dict:
    from ltx_core.model.audio_vae import encode_audio  # noqa: PLC0415
    from ltx_core.types import Audio  # noqa: PLC0415

    reference, ours = encoder_pair(config)
    results = {}
    on_cpu = our_encode_audio(ours, jnp.float32, jax.devices("cpu")[0])
    on_gpu = our_encode_audio(ours, jnp.bfloat16, jax.devices()[0])
    for rate in (44100, 16000):
        clip = waveform(rate, 2.0, seed=1)
        with torch.no_grad():
            expected = encode_audio(Audio(torch.from_numpy(clip)[None], rate), reference)
        results[f"encode_audio_float32_cpu_{rate}"] = relative_error(on_cpu(clip, rate), expected)
        results[f"encode_audio_bf16_gpu_{rate}"] = relative_error(on_gpu(clip, rate), expected)
    results["latent_shape"] = list(expected.shape)
    return results


def timing(config: dict) -> dict:
    from ltx_core.model.audio_vae import encode_audio  # noqa: PLC0415
    from ltx_core.types import Audio  # noqa: PLC0415

    reference, ours = encoder_pair(config)
    reference = reference.to("cuda", torch.bfloat16)
    clip = waveform(44100, 20.0, seed=2)
    encode = our_encode_audio(ours, jnp.bfloat16, jax.devices()[0])

    def torch_run() -> None:
        with torch.no_grad():
            encode_audio(Audio(torch.from_numpy(clip)[None].cuda(), 44100), reference)
        torch.cuda.synchronize()

    def jax_run() -> None:
        encode(clip, 44100)

    seconds = {}
    for name, run in (("ltx_core", torch_run), ("ltx_jax", jax_run)):
        run()
        times = []
        for _ in range(5):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        seconds[name] = statistics.median(times)
    return {"encode_20s_seconds": seconds, "ratio_ltx_jax_over_ltx_core": seconds["ltx_jax"] / seconds["ltx_core"]}


def main() -> None:
    config = production_config()
    report = {"torch": torch.__version__, "torchaudio": torchaudio.__version__, "jax": jax.__version__}
    report.update(front_end())
    report.update(encoder_parity(config))
    report.update(timing(config))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
