"""Records ltx-pipelines 1.2.0's text-to-audio pipeline on tiny random DiTs into tests/fixtures/ltx25_t2a/.

`T2AOneStagePipeline`, built by its own constructor and run through its own `__call__` on the CPU in float32, with
the stand-ins of record_ltx25_flows.py (its docstring: contexts from the prompt encoder, a decoder that keeps the
latent and decodes nothing, every torch.randn draw kept with its caller) and no other: the audio-only DiT is built
by 1.2.0's `LTXAudioOnlyModelConfigurator` through `DiffusionStage.from_checkpoint` with its
`LTXV_AUDIO_ONLY_MODEL_COMFY_RENAMING_MAP` (the video weights never read), the duration by its `DurationPredictor`.
Environment: see record_ltx25_fixtures.py.

    python tests/record_t2a.py [--check]    # from the project root

1.2.0's audio-only configurator drops `ff_bias`, `audio_ff_bias` and `use_prompt_adaln_single`, so it cannot build
from an LTX-2.5 file (FFN biases and a prompt AdaLN the file has not: its builder returns a model left on the meta
device; asserted below). Two runs:
    t2a         t2a_transformer.safetensors: a 2-block audio-video DiT with LTX-2.3's switches (FFN biases, the
                prompt AdaLN, gated attention, cross-attention AdaLN, no keyframe embedding; model_version 2.3.0),
                4 heads x 4 per stream (contexts 16 wide), written here. num_frames is
                `AutoDuration(0.5, 4.0)`: ltx25/duration_head.safetensors predicts it from the audio context
                alone.
    t2a_ltx25   ltx25_flows/flows_transformer.safetensors (LTX-2.5's switches), 1.2.0's configurator given the
                three switches it drops (`_AudioOnlyWithFileSwitches`: what ltx-jax builds from a 2.5 file), 9
                frames given.
t2a.npz   `settings` (JSON); per run: the stand-ins' contexts `{run}__context_{video|audio}[_negative]` (1, 8, width)
    (default_rng(11)), `{run}__audio` (1, 8, T, 16) what the pipeline hands its audio decoder, `{run}__num_frames`
    the frames it generated for (t2a: `t2a__duration_seconds` the head's prediction they come from),
    `{run}__noise_{i}` and `{run}__noise_kinds` (every draw: "noiser", audio only).
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from pathlib import Path
from unittest import mock

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "ltx25_t2a"
LTX25_TRANSFORMER = HERE / "fixtures" / "ltx25_flows" / "flows_transformer.safetensors"
DURATION_HEAD = HERE / "fixtures" / "ltx25" / "duration_head.safetensors"
sys.path.insert(0, str(HERE))
import record_ltx25_flows as flows  # noqa: E402
from record_ltx25_fixtures import _json_values, randomize, recorder_command  # noqa: E402
from torchaudio_stand_in import torchaudio_stand_in  # noqa: E402

with torchaudio_stand_in():
    from ltx_core.components.guiders import MultiModalGuiderParams
    from ltx_core.model.transformer import LTXAudioOnlyModelConfigurator, LTXModelConfigurator, model_configurator
    from ltx_pipelines import t2a_one_stage
    from ltx_pipelines.utils import blocks
    from ltx_pipelines.utils.model_paths import ModelPaths
    from ltx_pipelines.utils.types import AutoDuration
    from safetensors.torch import save_file

SEED, FPS, STEPS, LTX25_FRAMES = 7, 24.0, 3, 9
AUTO_DURATION = AutoDuration(min_seconds=0.5, max_seconds=4.0)  # the head's 0.95 s inside: rounded, snapped
GUIDANCE = {"cfg_scale": 7.0, "stg_scale": 1.0, "stg_blocks": [0], "rescale_scale": 0.7, "modality_scale": 1.0}
WIDTHS = {"t2a": {"video": 16, "audio": 16}, "t2a_ltx25": {"video": 64, "audio": 32}}  # the contexts'
SWITCHES = ("ff_bias", "audio_ff_bias", "use_prompt_adaln_single")  # what 1.2.0's audio-only configurator drops


def transformer_metadata() -> dict:
    """record_ltx25_flows' DiT config with LTX-2.3's switches, 4 heads x 4 per stream."""
    config = {
        **flows.flows_metadata()["config"]["transformer"], "ff_bias": True, "audio_ff_bias": True,
        "use_prompt_adaln_single": True, "use_keyframes_abs_pos_embedding": False, "num_attention_heads": 4,
        "attention_head_dim": 4, "cross_attention_dim": 16, "audio_num_attention_heads": 4,
        "audio_attention_head_dim": 4, "audio_cross_attention_dim": 16,
    }  # fmt: skip
    return {"config": {"transformer": config}, "model_version": "2.3.0"}


def write_transformer(path: Path) -> None:
    metadata = transformer_metadata()
    with torch.device("cpu"):
        model = LTXModelConfigurator.from_metadata(metadata)
        weights = randomize(model, torch.Generator().manual_seed(flows.WEIGHTS_SEED))
    tensors = {f"model.diffusion_model.{k}": v.contiguous() for k, v in weights.items()}
    save_file(tensors, str(path), metadata=_json_values(metadata))


class _AudioOnlyWithFileSwitches(LTXAudioOnlyModelConfigurator):
    """1.2.0's audio-only configurator given the switches of the file it builds from, which it drops."""

    @classmethod
    def from_metadata(cls, metadata: dict, *args: object, **kwargs: object) -> object:
        config = metadata["config"]["transformer"]
        switches = {name: config[name] for name in SWITCHES if name in config}
        model = functools.partial(model_configurator.LTXModel, **switches)
        with mock.patch.object(model_configurator, "LTXModel", model):
            return super().from_metadata(metadata, *args, **kwargs)


class _Draws(flows._Draws):
    """record_ltx25_flows' torch.randn, letting through the duration head's parameter initialisation on the meta
    device (its builder's placeholder, which the file's weights replace: no number is drawn)."""

    def __call__(self, *args: object, **kwargs: object) -> torch.Tensor:
        frame = sys._getframe(1)
        tensor = flows._RANDN(*args, **kwargs)
        if frame.f_code.co_name == "__init__" and "duration_head" in frame.f_code.co_filename:
            assert tensor.is_meta, "the duration head drew numbers"
            return tensor
        self.kinds.append(flows._draw_kind(frame, kwargs.get("generator")))
        self.tensors.append(tensor.clone())
        return tensor


def make_inputs(run: str, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The stand-in prompt encoder's contexts, under the names record_ltx25_flows' `_Run` reads."""
    names = [f"{m}{s}" for m in ("video", "audio") for s in ("", "_negative")]
    widths = WIDTHS[run]
    return {
        f"input__context_{n}": rng.standard_normal((1, 8, widths[n.split("_")[0]])).astype(np.float32) for n in names
    }


def run_t2a(run: str, inputs: dict[str, np.ndarray], paths: ModelPaths, num_frames: object) -> dict:
    """`T2AOneStagePipeline.__call__`; returns its fixture arrays."""
    stand_ins, rng_state, frames, seconds = flows._Run(run, inputs), torch.random.get_rng_state(), [], []
    stand_ins.draws = _Draws()

    def resolve_num_frames(num_frames: object, predictor: object, **kwargs: object) -> int:
        assert kwargs["video_encoding"] is None  # the duration from the audio context alone
        if predictor is not None:  # the head's seconds, before they become frames
            seconds.append(predictor._head(None, kwargs["audio_encoding"]).item())
        frames.append(blocks.resolve_num_frames(num_frames, predictor, **kwargs))
        return frames[-1]

    with contextlib.ExitStack() as stack:
        for target, name, value in stand_ins.patches(t2a_one_stage):
            stack.enter_context(mock.patch.object(target, name, value))
        stack.enter_context(mock.patch.object(t2a_one_stage, "resolve_num_frames", resolve_num_frames))
        if run == "t2a_ltx25":
            stack.enter_context(
                mock.patch.object(t2a_one_stage, "LTXAudioOnlyModelConfigurator", _AudioOnlyWithFileSwitches)
            )
        pipeline = t2a_one_stage.T2AOneStagePipeline(model_paths=paths, loras=[], device=flows.CPU)
        with torch.inference_mode():
            pipeline(prompt="prompt", negative_prompt="negative", seed=SEED, frame_rate=FPS,
                     num_inference_steps=STEPS, audio_guider_params=MultiModalGuiderParams(**GUIDANCE),
                     num_frames=num_frames)  # fmt: skip
    assert torch.equal(rng_state, torch.random.get_rng_state()), "something drew from torch's global generator"
    assert stand_ins.prompts == [["prompt", "negative"]], stand_ins.prompts
    assert set(stand_ins.kept) == {"audio"}, set(stand_ins.kept)  # no video decoded
    assert set(stand_ins.draws.kinds) == {"noiser"}, stand_ins.draws.kinds
    latent = stand_ins.kept["audio"]
    assert latent.dtype == torch.float32
    assert torch.isfinite(latent).all()
    sys.stdout.write(f"{run}: {frames[0]} frames, audio {tuple(latent.shape)}, {len(stand_ins.draws.kinds)} draws\n")
    arrays = {f"{run}__{k.removeprefix('input__')}": v for k, v in inputs.items()}
    arrays.update({f"{run}__audio": latent.numpy(), f"{run}__num_frames": np.array(frames[0])})
    arrays.update({f"{run}__duration_seconds": np.array(s, np.float32) for s in seconds})
    arrays.update({f"{run}__noise_{i}": tensor.numpy() for i, tensor in enumerate(stand_ins.draws.tensors)})
    arrays[f"{run}__noise_kinds"] = np.array(stand_ins.draws.kinds)
    return arrays


def assert_ltx25_cannot_build(paths: ModelPaths) -> None:
    """1.2.0 as it is: the audio-only DiT of an LTX-2.5 file keeps the FFN biases and the prompt AdaLN on the meta
    device (its builder only warns), so the stage cannot be built."""
    stage = blocks.DiffusionStage.from_checkpoint(
        paths.transformer(), torch.float32, flows.CPU, model_configurator=LTXAudioOnlyModelConfigurator,
        model_sd_ops=t2a_one_stage.LTXV_AUDIO_ONLY_MODEL_COMFY_RENAMING_MAP,
    )  # fmt: skip
    try:
        stage._build_transformer()
    except NotImplementedError as error:  # "Cannot copy out of meta tensor; no data!"
        if "meta tensor" not in str(error):
            raise
    else:
        raise AssertionError("1.2.0's audio-only configurator built from an LTX-2.5 file: the t2a_ltx25 run's patch")


def record(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    transformer = out / "t2a_transformer.safetensors"
    write_transformer(transformer)
    split = functools.partial(ModelPaths.from_split, audio_vae_path="audio_vae.safetensors")
    paths = {
        "t2a": split(transformer_path=str(transformer), duration_head_path=str(DURATION_HEAD)),
        "t2a_ltx25": split(transformer_path=str(LTX25_TRANSFORMER)),
    }
    assert_ltx25_cannot_build(paths["t2a_ltx25"])
    frames = {"t2a": AUTO_DURATION, "t2a_ltx25": LTX25_FRAMES}
    rng, arrays = np.random.default_rng(11), {}
    for run in ("t2a", "t2a_ltx25"):
        arrays.update(run_t2a(run, make_inputs(run, rng), paths[run], frames[run]))
    again = run_t2a("t2a", {k.replace("t2a__", "input__"): v for k, v in arrays.items() if "context" in k
                            and k.startswith("t2a__")}, paths["t2a"], AUTO_DURATION)  # fmt: skip
    assert all(np.array_equal(value, arrays[key]) for key, value in again.items()), "two runs differ"
    settings = {"reference": "ltx-pipelines 1.2.0", "seed": SEED, "frame_rate": FPS, "num_inference_steps": STEPS,
                "audio_guidance": GUIDANCE, "negative_prompt": "negative",
                "transformers": {"t2a": "ltx25_t2a/t2a_transformer.safetensors",
                                 "t2a_ltx25": "ltx25_flows/flows_transformer.safetensors"},
                "duration_head": "ltx25/duration_head.safetensors",
                "auto_duration": [AUTO_DURATION.min_seconds, AUTO_DURATION.max_seconds]}  # fmt: skip
    np.savez_compressed(out / "t2a.npz", settings=np.array(json.dumps(settings)), **arrays)
    for path in sorted(out.iterdir()):
        sys.stdout.write(f"{path.name}: {path.stat().st_size} bytes\n")


if __name__ == "__main__":
    recorder_command(__doc__.split("\n", 1)[0], record, FIXTURES)
