"""Flows are data: a flow defined and registered here, touching no library file, runs end to end on the
embedded model, and runs what its plan says; the built-in flows' plans and needs read as their
ltx-pipelines files do."""

import dataclasses
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

import ltx_jax
from ltx_jax import cli
from ltx_jax.pipeline import Flow, GenerationSettings, Needs, Plan, Stage, flows, generate
from ltx_jax.pipeline.requests import Request
from ltx_jax.pipeline.stages import denoise_audio_video
from ltx_jax.pipeline.types import VideoPixelShape

ROOT = pathlib.Path(__file__).parents[1]
TOY_SIGMAS = (1.0, 0.6, 0.25, 0.0)


def toy_plan(request, _geometry):
    """One unguided stage at the full size over three steps of its own sigmas, with gradient estimation."""
    return Plan((Stage(description="toy", downscale=1, sigmas=TOY_SIGMAS, sampler="gradient_estimation"),))


TOY = Flow(
    name="toy-three-steps",
    source="(a test)",
    summary="three unguided steps",
    plan=toy_plan,
    needs=Needs(),
    guided=False,
    size_multiple=32,
)


@pytest.fixture(scope="module")
def toy_pipe():
    flows.register(TOY)
    return ltx_jax.LTXPipeline.embedded(flow="toy-three-steps")


def test_a_registered_flow_runs_end_to_end_and_follows_its_plan(toy_pipe):
    out = toy_pipe("a red fox", height=64, width=96, num_frames=9, seed=5)
    assert out.video.shape == (9, 64, 96, 3)
    assert out.video.dtype == np.uint8
    assert out.audio.shape[1] == 2  # stereo
    [stats] = out.forwards.values()
    assert stats.forwards == len(TOY_SIGMAS) - 1  # unguided: one forward per step

    parts = toy_pipe._components  # the pipeline's own models, so the plan is compared on the same weights
    prompt, _ = toy_pipe.encode("a red fox")
    request = Request(prompt=prompt, height=64, width=96, num_frames=9, frame_rate=24.0, seed=5)
    by_flow = generate(parts, request, "toy-three-steps")
    by_hand = denoise_audio_video(
        parts.transformer, VideoPixelShape(1, 9, 64, 96, 24.0), np.asarray(TOY_SIGMAS, np.float32),
        jax.random.key(5), prompt, geometry=parts.geometry, dtype=parts.dtype, description="toy",
        sampler="gradient_estimation",
    )  # fmt: skip
    for mine, expected in zip(by_flow, by_hand, strict=True):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(expected))
    np.testing.assert_array_equal(np.asarray(by_flow[0]), out.video_latent)


def test_the_registry_refuses_unknown_names_and_a_second_flow_of_one_name():
    with pytest.raises(ValueError, match=r"flow must be one of \['one-stage'.*got 'three-stage'"):
        flows.get("three-stage")
    with pytest.raises(ValueError, match="already registered"):
        flows.register(Flow(name="two-stage", source="x", summary="x", plan=toy_plan))


def test_every_flow_is_listed_by_the_command_line():
    """`ltx-jax generate --help`, the console script the install put beside this Python."""
    command = [str(pathlib.Path(sys.executable).parent / "ltx-jax"), "generate", "--help"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.startswith("usage: ltx-jax generate")
    unwrapped = "".join(out.split())  # argparse wraps lines, also at hyphens
    for name in set(flows.names()) - {TOY.name}:  # the toy is registered in this process only
        assert "".join(f"{name}: {flows.get(name).summary}".split()) in unwrapped


@pytest.mark.parametrize(
    ("name", "stages", "needs"),
    [
        ("one-stage", [("denoising", 1, "noise", "noise")], Needs()),
        ("two-stage", [("stage 1", 2, "noise", "noise"), ("stage 2", 1, "upsampled", "previous")],
         Needs(upsampler=True, distilled_lora="stage_2")),
        ("a2vid", [("stage 1", 2, "noise", "input"), ("stage 2", 1, "upsampled", "previous")],
         Needs(upsampler=True, distilled_lora="stage_2", audio_input="required")),
        ("retake", [("retake", 1, "source", "source")], Needs(audio_input="from_source", source_video=True)),
        ("retake-guided", [("retake", 1, "source", "source")], Needs(audio_input="from_source", source_video=True)),
    ],
)  # fmt: skip
def test_built_in_plans(name, stages, needs):
    request = Request(prompt=None, height=128, width=128, num_frames=9, frame_rate=24.0, seed=0, num_inference_steps=3)
    plan = flows.get(name).plan(request, ltx_jax.pipeline.LatentGeometry())
    assert [(s.description, s.downscale, s.initial_video, s.initial_audio) for s in plan.stages] == stages
    assert flows.get(name).needs == needs


def test_settings_resolve_once(monkeypatch):
    """Resolved settings resolve to themselves (their checks, which read file headers, do not run again),
    and still resolve after a change, with the change checked."""
    defaults = flows.get("distilled").defaults("embedded")
    resolved = GenerationSettings(height=128, width=128, num_frames=9).resolve(defaults, "distilled")
    checks = []
    monkeypatch.setattr(GenerationSettings, "_check", lambda self, flow: checks.append(flow.name))
    assert resolved.resolve(defaults, "distilled") is resolved
    assert resolved.without_prompt_enhancement().resolve(defaults, "distilled").num_inference_steps == 8
    assert checks == []
    assert dataclasses.replace(resolved, seed=4).resolve(defaults, "distilled").seed == 4
    assert checks == ["distilled"]


def test_the_command_names_an_unknown_subcommand(capsys):
    assert cli.main(["generat"]) == 2
    assert "error: unknown command 'generat'; choose one of generate, convert, serve." in capsys.readouterr().err
    assert cli.main([]) == 2
    assert cli.main(["--help"]) == 0
    assert "ltx-jax {generate,convert,serve}" in capsys.readouterr().out
