"""Audio to video end to end: `scripts/generate.py --pipeline a2vid` on 8 simulated devices, its audio
encoder loaded from a checkpoint, and every bad audio input refused before any model is built.

The flow's latents against ltx-pipelines 1.2.0's `A2VidPipelineTwoStage.__call__` are in
test_flows_parity.py; the encoder, the mel front end and the file reader have their own
parity tests (test_audio_encoder.py, test_audio_processor.py).
"""

import json
import pathlib

import av
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from ltx_jax.model import audio_vae
from ltx_jax.pipeline import components, embedded, model_ledger, write_mp4
from ltx_jax.pipeline.audio_files import check_audio_file, read_audio

ROOT = pathlib.Path(__file__).parents[1]
from ltx_jax.cli import generate  # noqa: E402 - the command: its parser, without running it

RATE, SECONDS = 44100, 2.0


def write_wav(path: pathlib.Path, waveform: np.ndarray, rate: int = RATE, layout: str = "stereo") -> None:
    """`waveform` (channels, samples) in [-1, 1] as 16-bit PCM."""
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("pcm_s16le", rate=rate, layout=layout)
        pcm = (np.clip(waveform, -1, 1) * 32767).astype(np.int16)
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(pcm.T).reshape(1, -1), format="s16", layout=layout)
        frame.sample_rate = rate
        for packet in [*stream.encode(frame), *stream.encode()]:
            container.mux(packet)


def tone(seconds: float = SECONDS, channels: int = 2) -> np.ndarray:
    t = np.arange(int(RATE * seconds)) / RATE
    return np.repeat(0.5 * np.sin(2 * np.pi * 440 * t)[None], channels, axis=0).astype(np.float32)


def mp4_audio(path: pathlib.Path) -> tuple[np.ndarray, int, int]:
    """The first channel of the mp4's audio track, its sample rate and channel count."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        chunks = [frame.to_ndarray() for frame in container.decode(stream)]
        return np.concatenate(chunks, axis=-1)[0], stream.sample_rate, stream.channels


def best_correlation(signal: np.ndarray, reference: np.ndarray, max_lag: int = 4096) -> float:
    """The largest normalized correlation of `signal` with `reference` over shifts of up to `max_lag`
    samples (AAC's encoder delay shifts the decoded track)."""
    n = min(len(signal), len(reference)) - max_lag
    ref = reference[:n] / np.linalg.norm(reference[:n])
    return max(
        float(np.dot(signal[lag : lag + n], ref) / np.linalg.norm(signal[lag : lag + n])) for lag in range(max_lag)
    )


def test_a2vid_writes_the_input_audio_and_keeps_its_latent(tmp_path):
    """A 2 s tone in: stage 1 (28 video tokens) and stage 2 (112) run around its 49 audio latent frames,
    which stay the encoded input exactly; the mp4 carries the input audio at its own rate."""
    source = tmp_path / "tone.wav"
    write_wav(source, tone())
    out = tmp_path / "a2vid.mp4"
    args = generate.parse_args(
        ["--mesh", "8", "--pipeline", "a2vid", "--height", "128", "--width", "128", "--num-frames", "49",
         "--frame-rate", "25", "--num-inference-steps", "2", "--audio-path", str(source), "--output-path", str(out)]
    )  # fmt: skip
    result = generate.run(args)["videos"][0]["output"]
    assert set(result.forwards) == {28, 112}
    read, rate = read_audio(source, 0.0, 49 / 25)
    assert (rate, result.sample_rate) == (RATE, RATE)
    np.testing.assert_array_equal(result.audio, read.T)  # the input, not a decoded latent
    encode = components.audio_encoder_callable(
        lambda: audio_vae.audio_encoder_from_config(
            embedded.EMBEDDED_CONFIG, rngs=nnx.Rngs(embedded.EMBEDDED_WEIGHTS_SEED + 7)
        ),
        jnp.float32,
    )
    np.testing.assert_array_equal(result.audio_latent, np.asarray(encode(read, RATE))[:, :, :49])
    with av.open(str(out)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 49
    written, written_rate, channels = mp4_audio(out)
    assert (written_rate, channels) == (RATE, 2)
    assert abs(len(written) / RATE - 49 / 25) < 0.05
    assert best_correlation(written, read[0]) > 0.99


def test_the_audio_encoder_loads_from_a_checkpoint_and_takes_mono(tmp_path):
    """model_ledger's encoder from an official-style file equals the same weights built in memory; a mono
    file is encoded as the same signal on both channels (ltx-core's encoder would fail on one channel)."""
    config = json.loads(json.dumps(embedded.EMBEDDED_CONFIG))
    encoder = audio_vae.audio_encoder_from_config(config, rngs=nnx.Rngs(3))
    tensors = {
        ("audio_vae." if key.startswith("per_channel_statistics.") else "audio_vae.encoder.") + key: np.asarray(
            value.get_value()
        )
        for key, value in ((".".join(map(str, path)), v) for path, v in nnx.to_flat_state(nnx.state(encoder)))
    }
    tensors["vocoder.conv_pre.weight"] = np.ones(2)  # other components' keys are left alone
    loaded = components.audio_encoder_callable(
        lambda: model_ledger._audio_encoder(config, tensors, jnp.float32), jnp.float32
    )
    built = components.audio_encoder_callable(lambda: encoder, jnp.float32)
    clip = tone(0.5)
    np.testing.assert_array_equal(np.asarray(loaded(clip, RATE)), np.asarray(built(clip, RATE)))
    np.testing.assert_array_equal(np.asarray(built(clip[:1], RATE)), np.asarray(built(clip, RATE)))


def bad_inputs(tmp_path: pathlib.Path) -> list[tuple[list[str], str]]:
    write_wav(tmp_path / "tone.wav", tone())
    write_wav(tmp_path / "short.wav", tone(0.5))
    write_wav(tmp_path / "surround.wav", np.zeros((6, 4410), np.float32), layout="5.1")
    write_mp4(tmp_path / "silent.mp4", np.zeros((9, 64, 64, 3), np.uint8), 24.0)
    a2vid = ["--pipeline", "a2vid", "--height", "128", "--width", "128", "--num-frames", "17", "--audio-path"]
    wav = str(tmp_path / "tone.wav")
    return [
        (["--pipeline", "a2vid"], "a2vid flow needs audio_path \\(--audio-path FILE\\)"),
        (["--pipeline", "two-stage", "--audio-path", wav], "--audio-path: these belong to the a2vid flow"),
        (["--audio-start-time", "1"], "--audio-start-time: these belong to the a2vid flow"),
        ([*a2vid, str(tmp_path / "missing.wav")], "--audio-path .*missing.wav' does not exist"),
        ([*a2vid, str(ROOT / "README.md")], "--audio-path .*README.md' cannot be decoded"),
        ([*a2vid, str(tmp_path / "silent.mp4")], "--audio-path .*silent.mp4' has no audio stream"),
        ([*a2vid, str(tmp_path / "surround.wav")], "has 6 audio channels; .* mono or stereo"),
        ([*a2vid, wav, "--audio-start-time", "5"], "--audio-start-time"),
        ([*a2vid, wav, "--audio-max-duration", "0.2"], "--audio-max-duration\\) 0.2 s is shorter than the video"),
        ([*a2vid, wav, "--audio-start-time", "1.8"], "0.200 s of audio after --audio-start-time 1.8"),
        ([*a2vid, str(tmp_path / "short.wav"), "--num-frames", "33"], "has 0.500 s of audio .* lasts 1.375 s"),
    ]


def test_bad_audio_inputs_fail_before_anything_is_built(tmp_path, no_model_building):
    for argv, message in bad_inputs(tmp_path):
        args = generate.parse_args([*argv, "--output-path", str(tmp_path / "x.mp4")])
        with pytest.raises((ValueError, FileNotFoundError), match=message):
            generate.run(args)
    assert not (tmp_path / "x.mp4").exists()
    # the command line refuses NaN as it parses (test_generate.py); the library's own check, for Python callers:
    with pytest.raises(ValueError, match="--audio-start-time must be a finite number"):
        check_audio_file(tmp_path / "tone.wav", start_time=float("nan"))


def test_audio_at_a_rate_aac_cannot_carry_is_resampled_in_the_mp4(tmp_path):
    """a2vid writes its input audio at the input's rate; 192 kHz (not an AAC rate) becomes 48 kHz."""
    out = tmp_path / "hi_rate.mp4"
    t = np.arange(192000) / 192000
    write_mp4(out, np.zeros((25, 64, 64, 3), np.uint8), 25.0, np.sin(2 * np.pi * 440 * t)[None] * 0.5, 192000)
    written, rate, _ = mp4_audio(out)
    assert rate == 48000
    assert abs(len(written) / rate - 1.0) < 0.05
