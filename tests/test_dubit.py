"""The dubit flow against ltx-pipelines 1.2.0's `DubItPipeline.__call__`, and its inputs checked before any device work.

`record_dubit.py` ran the reference (float32, CPU) on the flows' tiny LTX-2.5 DiT with record_ltx25_flows.py's
stand-ins and recorded what it handed its decoders and every random draw. Here ltx-jax runs the dubit flow on the
same file with the same stand-ins (contexts; the reference video's latents at each stage's size over the IC-LoRA's
downscale factor 2; its audio's latent; a nearest-neighbour x2 upsampler; the plain DiT where the IC-LoRA would be
fused) and the reference's draws replayed into `stages.initial_noise`. The frames (the reference video's 11,
snapped to 9) and frame rate come from the recorded settings; `GenerationSettings` reads them from the file
(tested below on a real mp4).
"""

import dataclasses
import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from ltx_core_twin import relative_error
from tolerances import FLOAT32

from ltx_jax.convert.checkpoint import load_checkpoint
from ltx_jax.parallel import SequenceParallel, make_mesh
from ltx_jax.pipeline import (
    AudioInput,
    Components,
    GenerationSettings,
    Request,
    VideoCondition,
    flows,
    generate,
    ltx_pipeline,
    stages,
    write_mp4,
)
from ltx_jax.pipeline.model_ledger import CheckpointFiles
from ltx_jax.pipeline.stages import LatentGeometry, PromptEmbeddings

FIXTURES = Path(__file__).parent / "fixtures"
RECORDED = np.load(FIXTURES / "ltx25_dubit" / "dubit.npz")
SETTINGS = json.loads(str(RECORDED["settings"]))
TRANSFORMER = FIXTURES / SETTINGS["transformer"]


@pytest.fixture(scope="module")
def dit():
    model, _ = load_checkpoint(TRANSFORMER, dtype=jnp.float32, attention_backend="xla", progress=False)
    return model


def recorded_input(name: str) -> jnp.ndarray:
    return jnp.asarray(RECORDED[f"input__{name}"])


def components(transformer) -> Components:
    """The stand-ins `record_dubit.py` gave the reference."""
    path, _ = SETTINGS["reference_video"]

    def encode_video(video, height, width, frames):
        assert (video, height, width, frames) == (path, height, height, SETTINGS["num_frames"])
        return recorded_input(f"reference_video_{height}")

    return Components(
        transformer=transformer, stage_2_transformer=None, geometry=LatentGeometry(), dtype=jnp.float32,
        upsample=lambda latent: jnp.asarray(np.asarray(latent).repeat(2, axis=-1).repeat(2, axis=-2)),
        encode_video=encode_video, encode_audio=lambda waveform, rate: recorded_input("reference_audio"),
        reference_downscale_factor=SETTINGS["reference_downscale_factor"],
    )  # fmt: skip


def request() -> Request:
    return Request(
        prompt=PromptEmbeddings(recorded_input("context_video"), recorded_input("context_audio")),
        height=SETTINGS["height"], width=SETTINGS["width"], num_frames=SETTINGS["num_frames"],
        frame_rate=SETTINGS["frame_rate"], seed=SETTINGS["seed"],
        reference_videos=(VideoCondition(*SETTINGS["reference_video"]),),
        audio=AudioInput(np.zeros((2, 160), np.float32), 16000), model_version=(2, 5, 0),
    )  # fmt: skip


def assert_equals_reference(transformer, monkeypatch: pytest.MonkeyPatch) -> None:
    """ltx-jax's dubit flow with the reference's draws (only its noiser draws) equals what the reference decoded."""
    kinds = [str(kind) for kind in RECORDED["dubit__noise_kinds"]]
    assert set(kinds) == {"noiser"}
    draws = iter(RECORDED[f"dubit__noise_{i}"] for i in range(len(kinds)))

    def initial_noise(key, modality, shape, dtype):
        drawn = next(draws)
        assert drawn.shape == tuple(shape), f"the reference drew {drawn.shape}, ltx-jax wants {shape}"
        return jnp.asarray(drawn, dtype)

    monkeypatch.setattr(stages, "_noised_on_device", stages._noised_on_device.__wrapped__)  # op by op: replayable
    monkeypatch.setattr(stages, "initial_noise", initial_noise)
    video, audio = generate(components(transformer), request(), "dubit")
    assert next(draws, None) is None, "ltx-jax drew fewer arrays than the reference"
    for name, ours in (("video", video), ("audio", audio)):
        theirs = RECORDED[f"dubit__{name}"]
        assert ours.shape == theirs.shape, name
        assert relative_error(np.asarray(ours), theirs) <= FLOAT32, name


def test_dubit_equals_ltx_pipelines_1_2_0(dit, monkeypatch):
    assert_equals_reference(SequenceParallel(dit, make_mesh(1)), monkeypatch)


def test_dubit_on_8_devices_equals_ltx_pipelines_1_2_0(dit, monkeypatch):
    assert_equals_reference(SequenceParallel(dit, make_mesh(8)), monkeypatch)


def write_reference(path: Path, frames: int = 11, audio: bool = True) -> Path:
    video = np.full((frames, 64, 64, 3), 128, np.uint8)
    waveform = np.zeros((2, 16000 * max(frames, 1) // 24), np.float32)
    write_mp4(path, video, 24.0, waveform if audio else None, 16000 if audio else 0)
    return path


def test_the_reference_video_gives_the_frames_and_the_frame_rate(tmp_path):
    defaults = flows.get("dubit").defaults("embedded")
    reference = (VideoCondition(write_reference(tmp_path / "talk.mp4")),)
    resolved = GenerationSettings(reference_videos=reference).resolve(defaults, "dubit")
    assert (resolved.num_frames, resolved.frame_rate) == (9, 24.0)  # 11 frames snapped down to 8k + 1
    assert dataclasses.replace(resolved, seed=3).resolve(defaults, "dubit").num_frames == 9  # resolves again
    audio = ltx_pipeline._input_audio(resolved, flows.get("dubit"))  # what LTXPipeline's request carries
    assert (audio.waveform.shape[0], audio.sample_rate) == (2, 16000)
    assert audio.waveform.shape[1] >= 16000 * 11 // 24  # the whole track (AAC rounds it up to its frames)


def test_bad_dubit_inputs_are_refused_naming_the_flag(tmp_path):
    defaults = flows.get("dubit").defaults("embedded")
    talk, silent = write_reference(tmp_path / "talk.mp4"), write_reference(tmp_path / "silent.mp4", audio=False)
    (broken := tmp_path / "broken.mp4").write_bytes(b"not a video")
    frameless = write_reference(tmp_path / "frameless.mp4", frames=0)  # too short: the muxer drops the stream
    cases = [
        ({"reference_videos": (VideoCondition(silent),)}, r"--reference-video .*silent.mp4' has no audio track"),
        ({"reference_videos": (VideoCondition(broken),)}, r"--reference-video .*broken.mp4' cannot be read"),
        ({"reference_videos": (VideoCondition(frameless),)}, r"--reference-video .*frameless.mp4' .* no video stream"),
        ({"reference_videos": (VideoCondition(tmp_path / "none.mp4"),)}, r"--reference-video .* does not exist"),
        ({"reference_videos": (VideoCondition(talk),), "num_frames": 17}, r"num_frames \(--num-frames\): the dubit"),
        ({"reference_videos": (VideoCondition(talk),), "frame_rate": 25.0}, r"frame_rate \(--frame-rate\): the dubit"),
        ({"reference_videos": (VideoCondition(talk, 1.5),)}, r"--reference-strength 1.5 must lie in \[0, 1\]"),
        ({"reference_videos": (VideoCondition(talk),) * 2}, "exactly one reference video"),
        ({}, "exactly one reference video"),
        ({"reference_videos": (VideoCondition(talk),), "skip_stage_2": True}, "--skip-stage-2"),
        ({"reference_videos": (VideoCondition(talk),), "reference_attention_strength": 0.5}, "belong to the ic-lora"),
        ({"reference_videos": (VideoCondition(talk),), "audio_path": talk}, "--audio-path: these belong to"),
    ]
    for fields, message in cases:
        with pytest.raises((ValueError, FileNotFoundError), match=message):
            GenerationSettings(**fields).resolve(defaults, "dubit")


def test_dubit_needs_exactly_one_ic_lora():
    files = CheckpointFiles(TRANSFORMER, spatial_upsampler_path=TRANSFORMER)  # headers only: the flows' DiT file
    message = r"needs exactly one LoRA, the Dub-It IC-LoRA \(loras, --lora PATH \[STRENGTH\]\); got 0"
    with pytest.raises(ValueError, match=message):
        files.check("dubit")


def test_the_command_line_takes_upstreams_flags(tmp_path, no_model_building):
    from ltx_jax.cli import generate  # noqa: PLC0415 - the command: its parser, without running it

    talk = write_reference(tmp_path / "talk.mp4")
    bad = [
        (["--pipeline", "dubit"], "--pipeline dubit needs --reference-video PATH"),
        (["--pipeline", "dubit", "--reference-video", str(talk), "--video-conditioning", str(talk), "1"],
         "--video-conditioning: --pipeline dubit takes --reference-video"),
        (["--pipeline", "ic-lora", "--reference-video", str(talk)], "--reference-video: these belong to --pipeline"),
        (["--pipeline", "dubit", "--reference-video", str(talk), "--image", str(talk), "0", "1"], "takes none"),
    ]  # fmt: skip
    for argv, message in bad:
        with pytest.raises(ValueError, match=message):
            generate.run(generate.parse_args([*argv, "--output-path", str(tmp_path / "x.mp4")]))
    args = generate.parse_args(["--pipeline", "dubit", "--reference-video", str(talk), "--reference-strength", "0.5"])
    assert generate.reference_videos_of(args) == (VideoCondition(str(talk), 0.5),)
    with pytest.raises(no_model_building):  # every check passed
        generate.run(generate.parse_args(["--pipeline", "dubit", "--reference-video", str(talk)]))
