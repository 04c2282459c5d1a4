"""Every flow end to end against ltx-pipelines 1.2.0's own `__call__`, with the reference's noise.

CI cannot install 1.2.0, so `record_ltx25_flows.py` ran each reference pipeline (float32, CPU) on a tiny
LTX-2.5 DiT (`fixtures/ltx25_flows/flows_transformer.safetensors`: 8 heads per stream, the keyframe
embedding, no prompt AdaLN) and recorded what it handed its decoders, every random draw it made, and the
stand-ins' inputs (module docstring there). Here ltx-jax runs the same flow on the same file with the same
stand-ins (contexts, encoded images and videos, a nearest-neighbour x2 upsampler, the plain DiT where a
LoRA would be fused) and the reference's draws replayed in its own draw calls: the initial noise
(`stages.initial_noise`), the ancestral sampler's (`samplers.ancestral_noise`) and res_2s's
(`res2s.SdeNoise.draw`). The final latents must agree within DESIGN.md's float32 bound, on one device and,
for the distilled flow, on 8.
"""

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
    ImageCondition,
    Request,
    RetakeSpan,
    VideoCondition,
    generate,
    res2s,
    samplers,
    stages,
)
from ltx_jax.pipeline.guiders import MultiModalGuiderParams
from ltx_jax.pipeline.stages import Guidance, LatentGeometry, PromptEmbeddings

FIXTURES = Path(__file__).parent / "fixtures" / "ltx25_flows"
RECORDED = np.load(FIXTURES / "flows.npz")
SETTINGS = json.loads(str(RECORDED["settings"]))
FLOWS = {  # the recorded run -> ltx-jax's flow
    "one-stage": "one-stage", "two-stage": "two-stage", "two-stage-hq": "two-stage-hq", "distilled": "distilled",
    "keyframe-interpolation": "keyframe-interpolation", "ic-lora": "ic-lora", "ic-lora-masked": "ic-lora",
    "a2vid": "a2vid", "retake": "retake", "retake-guided": "retake-guided",
    "retake-guided-keep-audio": "retake-guided",
}  # fmt: skip
AUDIO = AudioInput(np.zeros((2, 16000), np.float32), 16000)  # what the stand-in audio encoder is given


@pytest.fixture(scope="module")
def dit():
    model, _ = load_checkpoint(
        FIXTURES / "flows_transformer.safetensors", dtype=jnp.float32, attention_backend="xla", progress=False
    )
    return model


def inputs(name: str) -> np.ndarray:
    return RECORDED[f"input__{name}"]


def components(transformer, run: str) -> Components:
    """The stand-ins `record_ltx25_flows.py` gave the reference, keyed as it keyed them."""
    audio = "source_audio" if run.startswith("retake") else "audio_latent"
    videos = {
        (SETTINGS["reference_video"][0], 32): "reference_video",
        ("source.mp4", SETTINGS["height"]): "source_video",
    }
    return Components(
        transformer=transformer, stage_2_transformer=transformer, geometry=LatentGeometry(), dtype=jnp.float32,
        upsample=lambda latent: jnp.asarray(np.asarray(latent).repeat(2, axis=-1).repeat(2, axis=-2)),
        encode_image=lambda path, height, width, crf: jnp.asarray(inputs(f"image_{Path(path).stem}_{height}")),
        encode_video=lambda path, height, width, frames: jnp.asarray(inputs(videos[(path, height)])),
        encode_audio=lambda waveform, rate: jnp.asarray(inputs(audio)),
        reference_downscale_factor=SETTINGS["reference_downscale_factor"],
    )  # fmt: skip


def request(run: str) -> Request:
    contexts = {
        f"{m}{s}": inputs(f"context_{m}{s}") for m in ("video", "audio") for s in ("", "_negative")
    }  # fmt: skip
    guidance = SETTINGS["guidance"]
    retake = run.startswith("retake")
    fields = {}
    if retake:
        regenerate_audio = run in ("retake", "retake-guided")
        fields = {"retake": RetakeSpan("source.mp4", *SETTINGS["retake_span"], regenerate_audio=regenerate_audio)}
    if run.startswith("ic-lora"):
        fields["reference_videos"] = (VideoCondition(*SETTINGS["reference_video"]),)
    if run == "ic-lora-masked":
        fields.update(skip_stage_2=True, reference_attention_strength=SETTINGS["attention_strength"],
                      reference_attention_mask=inputs("attention_mask"))  # fmt: skip
    return Request(
        prompt=PromptEmbeddings(contexts["video"], contexts["audio"]),
        negative=PromptEmbeddings(contexts["video_negative"], contexts["audio_negative"]),
        height=SETTINGS["height"], width=SETTINGS["width"], num_frames=SETTINGS["num_frames"],
        frame_rate=SETTINGS["frame_rate"], seed=SETTINGS["seed"], num_inference_steps=SETTINGS["num_inference_steps"],
        guidance=Guidance(*(MultiModalGuiderParams(**guidance[m]) for m in ("video", "audio"))),
        images=() if retake else tuple(ImageCondition(*image) for image in SETTINGS["images"]),
        audio=AUDIO if run == "a2vid" or retake else None, model_version=(2, 5, 0), **fields,
    )  # fmt: skip


def replay_reference_noise(run: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Routes ltx-jax's draws to the reference's recorded ones, kind by kind in call order; returns the
    iterators (empty once every recorded draw was used)."""
    kinds = [str(kind) for kind in RECORDED[f"{run}__noise_kinds"]]
    draws = {kind: iter([RECORDED[f"{run}__noise_{i}"] for i, k in enumerate(kinds) if k == kind]) for kind in kinds}

    def take(kind: str, shape: tuple[int, ...]) -> np.ndarray:
        drawn = next(draws[kind])
        assert drawn.shape == tuple(shape), f"{kind}: the reference drew {drawn.shape}, ltx-jax wants {shape}"
        return drawn

    monkeypatch.setattr(stages, "_noised_on_device", stages._noised_on_device.__wrapped__)  # op by op: replayable
    monkeypatch.setattr(
        stages, "initial_noise", lambda key, modality, shape, dtype: jnp.asarray(take("noiser", shape), dtype)
    )
    monkeypatch.setattr(
        samplers, "ancestral_noise", lambda key, step, modality, latent: jnp.asarray(take("ancestral", latent.shape))
    )
    monkeypatch.setattr(res2s.SdeNoise, "draw", lambda self, kind, shape: take(f"res2s_{kind}", shape))
    return draws


def assert_equals_reference(run: str, transformer, monkeypatch: pytest.MonkeyPatch) -> None:
    draws = replay_reference_noise(run, monkeypatch)
    video, audio = generate(components(transformer, run), request(run), FLOWS[run])
    assert all(next(left, None) is None for left in draws.values()), "ltx-jax drew fewer arrays than the reference"
    for name, ours in (("video", video), ("audio", audio)):
        theirs = RECORDED[f"{run}__{name}"]
        assert ours.shape == theirs.shape, name
        assert relative_error(np.asarray(ours), theirs) <= FLOAT32, name


@pytest.mark.parametrize("run", list(FLOWS))
def test_flow_equals_ltx_pipelines_1_2_0(run, dit, monkeypatch):
    assert_equals_reference(run, SequenceParallel(dit, make_mesh(1)), monkeypatch)  # jitted, as pipelines run it


def test_distilled_flow_on_8_devices_equals_ltx_pipelines_1_2_0(dit, monkeypatch):
    assert_equals_reference("distilled", SequenceParallel(dit, make_mesh(8)), monkeypatch)
