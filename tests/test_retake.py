"""Retake end to end: `scripts/generate.py --pipeline retake` on 8 simulated devices regenerates a span of
a source video and keeps the rest exactly; bad retake inputs are refused before any model is built.

The flow's latents against ltx-pipelines 1.2.0's `RetakePipeline.__call__` are in test_flows_parity.py.
"""

import pathlib

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from ltx_jax.model import audio_vae, video_vae
from ltx_jax.pipeline import components, embedded, flows, write_mp4
from ltx_jax.pipeline.audio_files import read_audio
from ltx_jax.pipeline.requests import RetakeSpan, check_retake

ROOT = pathlib.Path(__file__).parents[1]
from ltx_jax.cli import generate  # noqa: E402 - the command: its parser, without running it

FRAMES, HEIGHT, WIDTH, FPS, AUDIO_RATE = 17, 128, 192, 24.0, 24000
SPAN = (0.4, 0.6)
# Latent frames 0-1 cover pixel frames 0-8 (0 to 0.375 s): kept; frame 2 (0.375 to 0.708 s) overlaps the span.
# Audio latent frame k covers [(4k - 3) / 100, (4k + 1) / 100) s: frames 10-15 overlap it, of 18.
KEPT_VIDEO, KEPT_AUDIO = [0, 1], [*range(10), 16, 17]


def write_source(path: pathlib.Path, frames: int = FRAMES, audio: bool = True) -> None:
    t = np.linspace(0, 1, HEIGHT * WIDTH * 3).reshape(HEIGHT, WIDTH, 3)
    video = np.stack([(np.sin(6 * t + i / 3) * 120 + 128).astype(np.uint8) for i in range(frames)])
    samples = np.arange(int(AUDIO_RATE * frames / FPS)) / AUDIO_RATE
    waveform = np.repeat(0.4 * np.sin(2 * np.pi * 330 * samples)[None], 2, axis=0)
    write_mp4(path, video, FPS, waveform if audio else None, AUDIO_RATE if audio else 0)


def embedded_encoders() -> tuple:
    seed, config = embedded.EMBEDDED_WEIGHTS_SEED, embedded.EMBEDDED_CONFIG
    encoders = components.conditioning_encoders(
        lambda: video_vae.video_encoder_from_config(config, rngs=nnx.Rngs(seed + 3)), jnp.float32
    )
    encode_audio = components.audio_encoder_callable(
        lambda: audio_vae.audio_encoder_from_config(config, rngs=nnx.Rngs(seed + 7)), jnp.float32
    )
    return encoders["encode_video"], encode_audio


def test_retake_regenerates_the_span_and_keeps_the_rest(tmp_path):
    source, out = tmp_path / "source.mp4", tmp_path / "retake.mp4"
    write_source(source)
    args = generate.parse_args(
        ["--mesh", "8", "--pipeline", "retake", "--video-path", str(source), "--start-time", str(SPAN[0]),
         "--end-time", str(SPAN[1]), "--output-path", str(out)]  # 1.2.0's default: the distilled sigmas
    )  # fmt: skip
    result = generate.run(args)["videos"][0]["output"]
    settings = result.settings
    assert (settings.height, settings.width, settings.num_frames, settings.frame_rate) == (HEIGHT, WIDTH, FRAMES, FPS)
    assert set(result.forwards) == {3 * 4 * 6}
    assert result.video.shape == (FRAMES, HEIGHT, WIDTH, 3)
    encode_video, encode_audio = embedded_encoders()
    video = np.asarray(encode_video(source, HEIGHT, WIDTH, FRAMES))
    np.testing.assert_array_equal(result.video_latent[:, :, KEPT_VIDEO], video[:, :, KEPT_VIDEO])
    assert not np.allclose(result.video_latent[:, :, 2], video[:, :, 2])
    audio = np.asarray(encode_audio(*read_audio(source)))[:, :, :18]
    np.testing.assert_array_equal(result.audio_latent[:, :, KEPT_AUDIO], audio[:, :, KEPT_AUDIO])
    assert not np.allclose(result.audio_latent[:, :, 12], audio[:, :, 12])
    assert out.is_file()


def bad_inputs(tmp_path: pathlib.Path) -> list[tuple[list[str], str]]:
    source, odd = tmp_path / "source.mp4", tmp_path / "ten_frames.mp4"
    write_source(source, audio=False)
    write_source(odd, frames=10, audio=False)
    retake = ["--pipeline", "retake", "--video-path", str(source)]
    span = ["--start-time", "0.1", "--end-time", "0.3"]
    return [
        (["--pipeline", "retake"], "needs --video-path, --start-time and --end-time"),
        (["--pipeline", "two-stage", "--video-path", str(source)], "--video-path: these belong to --pipeline retake"),
        ([*retake, "--start-time", "0.3", "--end-time", "0.3"], "--start-time 0.3 must be >= 0 and before --end-time"),
        ([*retake, "--start-time", "1.0", "--end-time", "2.0"], "--start-time 1.0 s is past the source video's end"),
        ([*retake, *span, "--height", "128"], "height: the retake flow keeps its source video's size"),
        ([*retake, *span, "--image", str(source), "0", "1.0"], "images \\(--image\\): the retake flow takes none"),
        (["--pipeline", "retake", "--video-path", str(tmp_path / "missing.mp4"), *span], "missing.mp4' does not"),
        (["--pipeline", "retake", "--video-path", str(odd), *span], "with 10 frames; the VAE takes 8k\\+1 frames"),
        ([*retake, *span, "--num-inference-steps", "40"], "runs fixed sigmas .* use the retake-guided flow"),
        (["--pipeline", "retake-guided", "--video-path", str(source)], "retake-guided needs --video-path, --start"),
    ]


def test_bad_retake_inputs_fail_before_anything_is_built(tmp_path, no_model_building):
    for argv, message in bad_inputs(tmp_path):
        args = generate.parse_args([*argv, "--output-path", str(tmp_path / "x.mp4")])
        with pytest.raises((ValueError, TypeError, FileNotFoundError), match=message):
            generate.run(args)
    assert not (tmp_path / "x.mp4").exists()
    # the command line refuses NaN as it parses (test_generate.py); the library's own check, for Python callers:
    with pytest.raises(ValueError, match="must be finite seconds"):
        check_retake(RetakeSpan(tmp_path / "source.mp4", float("nan"), 0.3), 9, 24.0, flows.get("retake"))
