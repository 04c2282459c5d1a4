"""The t2a flow against ltx-pipelines 1.2.0's `T2AOneStagePipeline.__call__`, and its inputs checked before any
device work.

`record_t2a.py` ran the reference (float32, CPU) on two tiny DiT files with record_ltx25_flows.py's stand-ins
(contexts; a decoder that keeps the latent) and recorded what it handed its audio decoder, the frames it
generated for and every random draw: `t2a` an LTX-2.3-style file as 1.2.0 runs it (its duration head choosing the
frames from the audio context), `t2a_ltx25` the flows' LTX-2.5 file with the switches 1.2.0's audio-only
configurator drops given back (1.2.0 cannot build from it: record_t2a.py). Here ltx-jax loads each file's
audio-only DiT (`load_checkpoint(model_type="audio")`: its video weights never read), runs the t2a flow with the
same contexts and the reference's draws replayed into `stages.initial_noise`, and the audio latents must agree
(through `generate`, on 1 and 8 devices, and through `LTXPipeline` with its .wav).
"""

import dataclasses
import json
import wave
from collections.abc import Iterator
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import safetensors.numpy
from ltx_core_twin import relative_error
from tolerances import FLOAT32

from ltx_jax.convert.checkpoint import load_checkpoint
from ltx_jax.convert.safetensors_file import SafetensorsFile
from ltx_jax.convert.state_dict import DIT_PREFIX, expected_keys
from ltx_jax.parallel import SequenceParallel, make_mesh
from ltx_jax.pipeline import (
    Components,
    GeneratedVideo,
    GenerationSettings,
    Guidance,
    ImageCondition,
    LTXPipeline,
    MultiModalGuiderParams,
    PromptEmbeddings,
    Request,
    flows,
    generate,
    media_io,
    stages,
)
from ltx_jax.pipeline.components import PipelineModels
from ltx_jax.pipeline.duration import load_duration_predictor
from ltx_jax.pipeline.media_io import write_wav
from ltx_jax.pipeline.model_ledger import CheckpointFiles
from ltx_jax.pipeline.prompts import prompt_contexts
from ltx_jax.pipeline.stages import LatentGeometry

FIXTURES = Path(__file__).parent / "fixtures"
RECORDED = np.load(FIXTURES / "ltx25_t2a" / "t2a.npz")
SETTINGS = json.loads(str(RECORDED["settings"]))
RUNS = tuple(SETTINGS["transformers"])  # t2a, t2a_ltx25


@pytest.fixture(scope="module")
def dits() -> dict:
    return {
        run: load_checkpoint(FIXTURES / path, dtype=jnp.float32, attention_backend="xla", progress=False,
                             model_type="audio")[0]
        for run, path in SETTINGS["transformers"].items()
    }  # fmt: skip


def contexts(run: str, name: str) -> PromptEmbeddings:
    """The audio context alone: the stand-in encoder gave video ones too, which 1.2.0's t2a drops."""
    return PromptEmbeddings(None, jnp.asarray(RECORDED[f"{run}__context_audio{name}"]))


def request(run: str) -> Request:
    return Request(
        prompt=contexts(run, ""), negative=contexts(run, "_negative"), height=512, width=512,
        num_frames=int(RECORDED[f"{run}__num_frames"]), frame_rate=SETTINGS["frame_rate"], seed=SETTINGS["seed"],
        num_inference_steps=SETTINGS["num_inference_steps"],
        guidance=Guidance(audio=MultiModalGuiderParams(**SETTINGS["audio_guidance"])),
    )  # fmt: skip


def replay_reference_noise(run: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[np.ndarray]:
    """ltx-jax's one draw (the audio's initial noise) replaced by the reference's; returns the draws left."""
    kinds = [str(kind) for kind in RECORDED[f"{run}__noise_kinds"]]
    assert kinds == ["noiser"]
    draws = iter([RECORDED[f"{run}__noise_0"]])

    def initial_noise(key, modality, shape, dtype):
        drawn = next(draws)
        assert modality == 1, "a video draw"
        assert drawn.shape == tuple(shape), f"the reference drew {drawn.shape}, ltx-jax wants {shape}"
        return jnp.asarray(drawn, dtype)

    monkeypatch.setattr(stages, "_noised_on_device", stages._noised_on_device.__wrapped__)  # op by op: replayable
    monkeypatch.setattr(stages, "initial_noise", initial_noise)
    return draws


def assert_equals_reference(run: str, transformer, monkeypatch: pytest.MonkeyPatch) -> None:
    """ltx-jax's t2a flow with the reference's draw equals what the reference decoded."""
    draws = replay_reference_noise(run, monkeypatch)
    components = Components(transformer=transformer, geometry=LatentGeometry(), dtype=jnp.float32)
    video, audio = generate(components, request(run), "t2a")
    assert next(draws, None) is None, "ltx-jax drew fewer arrays than the reference"
    theirs = RECORDED[f"{run}__audio"]
    assert video is None
    assert audio.shape == theirs.shape
    assert relative_error(np.asarray(audio), theirs) <= FLOAT32, run


@pytest.mark.parametrize("run", RUNS)
def test_t2a_equals_ltx_pipelines_1_2_0(run, dits, monkeypatch):
    assert dits[run].cfg.model_type == "audio"
    assert not hasattr(dits[run], "patchify_proj")
    assert_equals_reference(run, SequenceParallel(dits[run], make_mesh(1)), monkeypatch)


def test_t2a_on_8_devices_equals_ltx_pipelines_1_2_0(dits, monkeypatch):
    assert_equals_reference("t2a", SequenceParallel(dits["t2a"], make_mesh(8)), monkeypatch)


class SilentDecoder:
    """The audio decoder, decoding nothing: 640 zero samples per latent frame at 16 kHz (as the vocoder's length)."""

    sample_rate = 16000

    def __call__(self, latent):
        return np.zeros((2, latent.shape[2] * 640), np.float32), self.sample_rate

    def compile_ahead(self, shape):
        pass


def test_ltx_pipeline_generates_the_reference_audio_and_writes_a_wav(dits, monkeypatch, tmp_path):
    """`LTXPipeline` with the flow's settings, checks, plan, compile-ahead (no video decoder) and .wav output."""
    draws = replay_reference_noise("t2a", monkeypatch)
    components = Components(transformer=dits["t2a"], geometry=LatentGeometry(), dtype=jnp.float32)
    models = PipelineModels(components, None, SilentDecoder(), None, flows.get("t2a").defaults("2.3"), "fixture")
    out = LTXPipeline(models, flow="t2a")(
        contexts("t2a", ""), negative_prompt=contexts("t2a", "_negative"), num_frames=int(RECORDED["t2a__num_frames"]),
        seed=SETTINGS["seed"], num_inference_steps=SETTINGS["num_inference_steps"],
        guidance=Guidance(audio=MultiModalGuiderParams(**SETTINGS["audio_guidance"])), output_path=tmp_path / "a.wav",
    )  # fmt: skip
    assert next(draws, None) is None
    assert out.video is None
    assert relative_error(np.asarray(out.audio_latent), RECORDED["t2a__audio"]) <= FLOAT32
    assert out.audio.shape == (18 * 640, 2)
    with wave.open(str(tmp_path / "a.wav")) as wav:
        assert (wav.getnchannels(), wav.getframerate(), wav.getnframes()) == (2, 16000, 18 * 640)


# 1.2.0's LTXV_AUDIO_ONLY_MODEL_COMFY_RENAMING_MAP: the file keys (under model.diffusion_model.) its t2a reads
AUDIO_ONLY_KEYS = ("audio_attn1", "audio_attn2", "audio_ff", "audio_patchify", "audio_proj_out", "audio_adaln_single",
                   "audio_prompt", "audio_scale_shift_table")  # fmt: skip


@pytest.mark.parametrize("run", RUNS)
def test_the_audio_only_dit_reads_the_keys_1_2_0_reads(run, dits):
    file = SafetensorsFile(FIXTURES / SETTINGS["transformers"][run])
    dit_keys = [key.removeprefix(DIT_PREFIX) for key in file.keys()]
    assert set(expected_keys(dits[run])) == {key for key in dit_keys if any(part in key for part in AUDIO_ONLY_KEYS)}
    assert len(dit_keys) > 2 * len(expected_keys(dits[run]))  # the video stream and the cross-attention: unread


def test_the_duration_comes_from_the_audio_context_alone(dits):
    """1.2.0's t2a predicts the frames from the prompt's audio context (no video one): the duration head, the
    contexts `prompt_contexts` gives an audio-only DiT, and the frames the reference generated."""
    head = load_duration_predictor(FIXTURES / SETTINGS["duration_head"], jnp.float32)
    low, high = SETTINGS["auto_duration"]
    audio = contexts("t2a", "").audio
    assert relative_error(np.array(head.seconds(None, audio)), RECORDED["t2a__duration_seconds"]) <= FLOAT32
    frames = head(None, audio, frame_rate=SETTINGS["frame_rate"], min_seconds=low, max_seconds=high)
    assert frames == int(RECORDED["t2a__num_frames"])

    class Encoder:  # what Gemma's prompt encoder returns: both contexts
        def encode_prompts(self, texts):
            return [type("Out", (), {"video_encoding": np.zeros((1, 4, 16)), "audio_encoding": t})() for t in texts]

    defaults = flows.get("t2a").defaults("2.3")
    positive, negative = prompt_contexts(
        Encoder(), "a dog barks", None, guidance=defaults.guidance, flow="t2a", defaults=defaults, cfg=dits["t2a"].cfg
    )
    assert (positive.video, negative.video, positive.audio) == (None, None, "a dog barks")
    assert defaults.guidance.audio.modality_scale == 1.0
    assert defaults.guidance.video == MultiModalGuiderParams()


def test_the_audio_is_written_as_a_wav_and_nothing_partial(tmp_path, monkeypatch):
    waveform = np.stack([np.linspace(-1.5, 1.5, 4800), np.zeros(4800)]).astype(np.float32)
    settings = GenerationSettings().resolve(flows.get("t2a").defaults("2.5"), "t2a")
    out = GeneratedVideo(None, waveform.T, 24.0, 48000, None, None, settings, {}, {})
    out.save(tmp_path / "dog.wav")
    with wave.open(str(tmp_path / "dog.wav")) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate(), wav.getnframes()) == (2, 2, 48000, 4800)
        pcm = np.frombuffer(wav.readframes(4800), "<i2").reshape(-1, 2)
    assert (pcm[0, 0], pcm[-1, 0], pcm[2400, 1]) == (-32767, 32767, 0)  # clipped, x 32767, as 1.2.0
    with pytest.raises(ValueError, match=r"save: path '.*dog.mp4': audio alone is written as a .wav"):
        out.save(tmp_path / "dog.mp4")
    with pytest.raises(ValueError, match="audio must be"):  # refused before writing
        GeneratedVideo(None, np.zeros((5, 3)), 24.0, 48000, None, None, settings, {}, {}).save(tmp_path / "bad.wav")
    calls = iter([None, KeyboardInterrupt()])  # a signal after the first second is written

    def signalled() -> None:
        if (stop := next(calls)) is not None:
            raise stop

    monkeypatch.setattr(media_io, "raise_if_signalled", signalled)
    with pytest.raises(KeyboardInterrupt):
        write_wav(tmp_path / "stopped.wav", np.zeros((2, 96000), np.float32), 48000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dog.wav"]  # no file, no .partial.wav


def test_bad_t2a_inputs_are_refused_naming_the_flag(tmp_path):
    defaults = flows.get("t2a").defaults("2.5")
    video_guidance = Guidance(MultiModalGuiderParams(cfg_scale=3.0), defaults.guidance.audio)
    cases = [
        ({"height": 256}, r"^height \(--height\): the t2a flow makes audio only"),
        ({"width": 640}, r"^width \(--width\): the t2a flow makes audio only"),
        ({"images": (ImageCondition("README.md", 0, 1.0),)}, r"images \(--image\): the t2a flow takes none; it makes"),
        ({"guidance": video_guidance}, r"guidance.video \(the --video-\* guidance flags\): the t2a flow makes no"),
        ({"num_frames": 10}, "num_frames=10 must be 8k"),
        ({"audio_path": "README.md"}, "--audio-path: these belong to the a2vid flow"),
    ]
    for fields, message in cases:
        with pytest.raises(ValueError, match=message):
            GenerationSettings(**fields).resolve(defaults, "t2a")
    resolved = GenerationSettings(height=512).resolve(defaults, "t2a")  # the placeholder: resolves again
    assert (resolved.height, resolved.width) == (512, 512)
    embeddings = PromptEmbeddings(jnp.zeros((1, 4, 16)), jnp.zeros((1, 4, 16)))
    with pytest.raises(ValueError, match=r"prompt.video / negative.video: the t2a flow makes audio only"):
        generate(Components(None, LatentGeometry(), jnp.float32), Request(
            prompt=embeddings, height=512, width=512, num_frames=9, frame_rate=24.0, seed=0), "t2a")  # fmt: skip
    audio_vae = tmp_path / "audio_vae.safetensors"  # a header is all `check` reads
    safetensors.numpy.save_file({"x": np.zeros(1, np.float32)}, audio_vae, metadata={"config": '{"audio_vae": {}}'})
    files = CheckpointFiles(transformer_path=FIXTURES / SETTINGS["transformers"]["t2a"], audio_vae_path=audio_vae)
    files.check("t2a")  # no --video-vae-path needed
    with pytest.raises(ValueError, match=r"spatial_upsampler_path \(--spatial-upsampler-path\): the t2a flow makes no"):
        dataclasses.replace(files, spatial_upsampler_path=audio_vae).check("t2a")


def test_the_command_line_takes_upstreams_flags(tmp_path, no_model_building):
    from ltx_jax.cli import generate as command  # noqa: PLC0415 - the command: its parser, without running it

    bad = [
        (["--output-path", str(tmp_path / "x.mp4")], r"--output-path '.*x.mp4': audio alone is written as a .wav"),
        (["--video-cfg-guidance-scale", "2"], "--video-cfg-guidance-scale: --pipeline t2a makes audio only"),
        (["--v2a-guidance-scale", "2"], "--v2a-guidance-scale: --pipeline t2a makes audio only"),
        (["--height", "256"], r"height \(--height\): the t2a flow makes audio only"),
        (["--reference-video", "README.md"], "--reference-video: these belong to --pipeline dubit"),
    ]
    for argv, message in bad:
        output = [] if "--output-path" in argv else ["--output-path", str(tmp_path / "x.wav")]
        args = command.parse_args(["--pipeline", "t2a", *argv, *output])
        with pytest.raises(ValueError, match=message):
            command.run(args)
    args = command.parse_args(["--pipeline", "t2a", "--audio-cfg-guidance-scale", "5", "--audio-stg-blocks", "1"])
    with pytest.raises(no_model_building):  # every check passed
        command.run(args)
    assert args.output_path == Path("output.wav")
