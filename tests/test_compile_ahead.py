"""What stage 2 is compiled for ahead (`pipelines.later_first_forwards`, read from the flow's plan) is what
its first DiT call gets, in every flow with a stage 2 it covers: the same pytree, shapes, dtypes, weak types
and perturbations."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ltx_jax.pipeline import decoders, flows
from ltx_jax.pipeline.guiders import MultiModalGuiderParams
from ltx_jax.pipeline.pipelines import generate, later_first_forwards
from ltx_jax.pipeline.requests import AudioInput, Components, ImageCondition, Request, VideoCondition
from ltx_jax.pipeline.stages import Guidance, LatentGeometry, PromptEmbeddings

GEOMETRY = LatentGeometry(video_channels=8, audio_channels=2, audio_mel_bins=4)
GUIDED = Guidance(MultiModalGuiderParams(cfg_scale=3.0, stg_scale=1.0, stg_blocks=(1,)), MultiModalGuiderParams())


class RecordingForward:
    """A DiT stand-in: records each call's inputs, returns zero velocities."""

    def __init__(self):
        self.calls = []

    def __call__(self, video, audio, perturbations=None):
        self.calls.append((video, audio, perturbations))
        return tuple(None if m is None else jnp.zeros_like(m.latent) for m in (video, audio))


def signature(tree):
    leaves, structure = jax.tree.flatten(tree)
    return structure, [(x.shape, jnp.dtype(x.dtype), bool(getattr(x, "weak_type", False))) for x in leaves]


@pytest.mark.parametrize("flow", ["two-stage", "two-stage-hq", "distilled", "ic-lora", "a2vid"])
def test_stage_2_is_compiled_for_what_its_first_call_gets(flow):
    stage_1, stage_2 = RecordingForward(), RecordingForward()
    components = Components(
        transformer=stage_1, stage_2_transformer=stage_2, geometry=GEOMETRY, dtype=jnp.bfloat16,
        upsample=lambda latent: jnp.repeat(jnp.repeat(latent, 2, axis=3), 2, axis=4),
        encode_audio=lambda waveform, rate: jnp.zeros((1, 2, 40, 4), jnp.float32),
        encode_video=lambda path, h, w, frames: jnp.zeros((1, 8, (frames - 1) // 8 + 1, h // 32, w // 32)),
    )  # fmt: skip
    rng = np.random.default_rng(0)
    contexts = [PromptEmbeddings(*(jnp.asarray(rng.normal(size=(1, 8, 16)), jnp.float32) for _ in "va")) for _ in "pn"]
    request = Request(
        prompt=contexts[0], negative=contexts[1], height=128, width=128, num_frames=9, frame_rate=24.0, seed=1,
        num_inference_steps=2, guidance=GUIDED if flow in ("two-stage", "two-stage-hq", "a2vid") else Guidance(),
        audio=AudioInput(np.zeros((2, 16000), np.float32), 16000) if flow == "a2vid" else None,
        reference_videos=(VideoCondition("reference.mp4", 1.0),) if flow == "ic-lora" else (),
    )  # fmt: skip
    [(stage, expected)] = later_first_forwards(components, request, flows.get(flow).plan(request, GEOMETRY))
    assert stage.description == "stage 2"
    generate(components, request, flow)
    video, audio, perturbations = stage_2.calls[0]
    assert signature((video, audio)) == signature(expected[:2])
    assert perturbations == expected[2]
    assert video.latent.shape[1] == 2 * 4 * 4  # stage 2's call: 2 latent frames of 4 x 4


def test_no_stage_2_is_compiled_where_it_is_skipped_or_conditioned_on_images():
    components = Components(transformer=RecordingForward(), geometry=GEOMETRY, dtype=jnp.bfloat16)
    prompt = PromptEmbeddings(jnp.zeros((1, 8, 16)), jnp.zeros((1, 8, 16)))
    request = Request(prompt=prompt, height=128, width=128, num_frames=9, frame_rate=24.0, seed=1)
    skipped = Request(**{**request.__dict__, "skip_stage_2": True})
    with_image = Request(**{**request.__dict__, "images": (ImageCondition("frame.png", 0, 1.0),)})
    assert later_first_forwards(components, request, plan_of("one-stage", request)) == []
    assert later_first_forwards(components, skipped, plan_of("ic-lora", skipped)) == []
    assert later_first_forwards(components, with_image, plan_of("distilled", with_image)) == []
    assert len(later_first_forwards(components, request, plan_of("distilled", request))) == 1


def plan_of(flow, request):
    return flows.get(flow).plan(request, GEOMETRY)


class RecordingCompiler:
    def submit(self, *sequences):
        self.sequences = [[getattr(c, "func", c).__qualname__ for c in sequence] for sequence in sequences]


class VideoDecoding:
    def compile_ahead(self, *shape):
        raise AssertionError("recorded, not run")


class AudioDecoding(VideoDecoding):
    def compile_ahead(self, *shape):
        raise AssertionError("recorded, not run")


@pytest.mark.parametrize(
    ("flow", "first_thread"),
    [
        ("one-stage", ["AudioDecoding.compile_ahead"]),
        ("two-stage", ["_compile_stage", "AudioDecoding.compile_ahead"]),
        ("a2vid", ["_compile_stage"]),  # its audio is the input's: nothing to decode
    ],
)
def test_what_runs_after_stage_1_is_compiled_in_the_order_it_runs(flow, first_thread):
    """The later stages' DiT programs, then the audio decoder, on one thread; the video decoder on the other."""
    components = Components(transformer=RecordingForward(), geometry=GEOMETRY, dtype=jnp.bfloat16)
    prompt = PromptEmbeddings(jnp.zeros((1, 8, 16)), jnp.zeros((1, 8, 16)))
    request = Request(prompt=prompt, height=128, width=128, num_frames=9, frame_rate=24.0, seed=1)
    compiler = RecordingCompiler()
    decoders.compile_after_stage_1(
        compiler, components, VideoDecoding(), AudioDecoding(), request, flows.get(flow), plan_of(flow, request)
    )
    assert compiler.sequences == [first_thread, ["VideoDecoding.compile_ahead"]]
