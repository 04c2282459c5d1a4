"""Records ltx-pipelines 1.2.0's Dub-It pipeline on the flows' tiny LTX-2.5 DiT into tests/fixtures/ltx25_dubit/.

`DubItPipeline`, built by its own constructor and run through its own `__call__` on the CPU in float32, with the
stand-ins of record_ltx25_flows.py (its docstring: contexts from the prompt encoder, keys mapped to latents by the
encoders, a nearest-neighbour x2 upsampler, decoders that keep the latent, every stage the plain DiT with its LoRA
left out, every torch.randn draw kept with its caller) and these of Dub-It's own: the reference video's metadata
(`get_videostream_metadata`) says REFERENCE_FRAMES frames at FPS, which the pipeline snaps to 8k+1; its frames,
at each stage's size over the stand-in IC-LoRA's `reference_downscale_factor` 2, are keys the video encoder maps
to `input__reference_video_{32|64}`; its audio track (`decode_audio_from_file`) is a key the audio encoder
(`vae_encode_audio`) maps to `input__reference_audio`. The DiT is record_ltx25_flows.write_transformer's, checked
equal to the committed tests/fixtures/ltx25_flows/flows_transformer.safetensors, which the test loads.
Environment: see record_ltx25_fixtures.py.

    python tests/record_dubit.py [--check]    # from the project root

dubit.npz   `settings` (JSON); the stand-ins' inputs (default_rng(5)): `input__context_{video|audio}` (1, 8, 64|32),
    `input__reference_video_32` (1, 128, 2, 1, 1) (stage 1), `input__reference_video_64` (1, 128, 2, 2, 2)
    (stage 2), `input__reference_audio` (1, 8, 12, 16) (longer than the 9 generated audio frames); and
    dubit__video (1, 128, 2, 4, 4), dubit__audio (1, 8, 9, 16)   what the pipeline hands its decoders
    dubit__stage_2_audio   the audio latent its stage 2 returns (frozen: stage 1's)
    dubit__noise_{i}, dubit__noise_kinds   every torch.randn draw in call order and its caller (all "noiser")
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import types
from pathlib import Path
from unittest import mock

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "ltx25_dubit"
TRANSFORMER = HERE / "fixtures" / "ltx25_flows" / "flows_transformer.safetensors"
sys.path.insert(0, str(HERE))
import record_ltx25_flows as flows  # noqa: E402
from record_ltx25_fixtures import recorder_command  # noqa: E402
from torchaudio_stand_in import torchaudio_stand_in  # noqa: E402

with torchaudio_stand_in():
    from ltx_core.loader import LoraPathStrengthAndSDOps
    from ltx_core.loader.sd_ops import LTXV_LORA_COMFY_RENAMING_MAP
    from ltx_core.types import AudioLatentShape, VideoPixelShape
    from ltx_pipelines import dubit, iclora_utils
    from ltx_pipelines.utils.model_paths import ModelPaths
    from safetensors.torch import load_file, save_file

HEIGHT, WIDTH, FPS, SEED, DOWNSCALE = flows.HEIGHT, flows.WIDTH, flows.FPS, flows.SEED, flows.DOWNSCALE
REFERENCE_VIDEO, REFERENCE_STRENGTH, REFERENCE_FRAMES = "reference.mp4", 0.9, 11  # 11 frames: 9 generated
FRAMES = (REFERENCE_FRAMES - 1) // 8 * 8 + 1
AUDIO_FRAMES = AudioLatentShape.from_duration(batch=1, duration=FRAMES / FPS).frames  # 9
REFERENCE_AUDIO_FRAMES = 12
WIDTHS = (("video", 64), ("audio", 32))  # the contexts'


def make_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(5)
    inputs = {f"input__context_{name}": rng.standard_normal((1, 8, width)) for name, width in WIDTHS}
    for size in (HEIGHT // 2 // DOWNSCALE, HEIGHT // DOWNSCALE):  # stage 1, stage 2
        inputs[f"input__reference_video_{size}"] = rng.standard_normal((1, 128, 2, size // 32, size // 32))
    inputs["input__reference_audio"] = rng.standard_normal((1, 8, REFERENCE_AUDIO_FRAMES, 16))
    return {k: v.astype(np.float32) for k, v in inputs.items()}


def _reference_frames(path: str, height: int, width: int, *_: object) -> str:
    assert (path, width) == (REFERENCE_VIDEO, height), (path, height, width)
    return f"input__reference_video_{height}"


class _DubItRun(flows._Run):
    """record_ltx25_flows' stand-ins, Dub-It's reference video and its audio track added."""

    def decode_audio_file(self, path: str, *_: object) -> flows.Audio:
        assert path == REFERENCE_VIDEO, path
        return self.audio_file

    def encode_audio(self, audio: flows.Audio, encoder: str, *_: object) -> torch.Tensor:
        assert audio is self.audio_file
        assert encoder == "audio encoder", encoder
        return self.encoder("input__reference_audio")

    def patches(self, module: types.ModuleType) -> list[tuple[object, str, object]]:
        reference = VideoPixelShape(batch=1, frames=REFERENCE_FRAMES, height=HEIGHT, width=WIDTH, fps=FPS)
        ours = {
            (module, "get_videostream_metadata"): lambda path, **_: reference if path == REFERENCE_VIDEO else None,
            (iclora_utils, "video_preprocess"): _reference_frames,
        }
        kept = [(target, name, value) for target, name, value in super().patches(module) if (target, name) not in ours]
        return [*kept, *((target, name, value) for (target, name), value in ours.items())]


def run_dubit(inputs: dict[str, np.ndarray], paths: ModelPaths, lora: LoraPathStrengthAndSDOps) -> dict:
    """`DubItPipeline.__call__`; returns its fixture arrays."""
    run, rng_state = _DubItRun("dubit", inputs), torch.random.get_rng_state()
    with contextlib.ExitStack() as stack:
        for target, name, value in run.patches(dubit):
            stack.enter_context(mock.patch.object(target, name, value))
        pipeline = dubit.DubItPipeline(model_paths=paths, spatial_upsampler_path="upsampler.safetensors",
                                       ic_lora=lora, device=flows.CPU)  # fmt: skip
        assert pipeline.reference_downscale_factor == DOWNSCALE
        with torch.inference_mode():
            pipeline(prompt="prompt", seed=SEED, height=HEIGHT, width=WIDTH, images=[],
                     reference_video_path=REFERENCE_VIDEO, reference_strength=REFERENCE_STRENGTH,
                     tiling_config=None)  # fmt: skip
    assert torch.equal(rng_state, torch.random.get_rng_state()), "something drew from torch's global generator"
    assert run.prompts == [["prompt"]], run.prompts
    assert set(run.draws.kinds) == {"noiser"}, run.draws.kinds
    [stage] = run.stages  # one DiffusionStage, with the IC-LoRA, runs both stages
    assert run.dropped_loras == [("lora_stand_in.safetensors",)], run.dropped_loras
    flows.check("dubit", run)
    arrays = {f"dubit__{name}": run.kept[name].numpy() for name in ("video", "audio")}
    arrays["dubit__stage_2_audio"] = stage.audio_states[-1].latent.numpy()
    arrays.update({f"dubit__noise_{i}": tensor.numpy() for i, tensor in enumerate(run.draws.tensors)})
    arrays["dubit__noise_kinds"] = np.array(run.draws.kinds)
    return arrays


def record(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        transformer = Path(tmp) / "flows_transformer.safetensors"
        flows.write_transformer(transformer)
        written, committed = load_file(str(transformer)), load_file(str(TRANSFORMER))
        assert written.keys() == committed.keys()
        assert all(torch.equal(written[k], committed[k]) for k in written), "not the committed flows' DiT"
        paths = ModelPaths.from_split(transformer_path=str(transformer), video_vae_path=str(transformer),
                                      audio_vae_path=str(transformer))  # fmt: skip
        lora_path = Path(tmp) / "lora_stand_in.safetensors"  # read for its metadata only; never fused
        save_file({"unused": torch.zeros(1)}, str(lora_path), metadata={"reference_downscale_factor": str(DOWNSCALE)})
        lora = LoraPathStrengthAndSDOps(str(lora_path), 1.0, LTXV_LORA_COMFY_RENAMING_MAP)
        inputs = make_inputs()
        arrays = run_dubit(inputs, paths, lora)
        again = run_dubit(inputs, paths, lora)
    assert all(np.array_equal(value, arrays[key]) for key, value in again.items()), "two runs differ"
    settings = {"reference": "ltx-pipelines 1.2.0", "transformer": "ltx25_flows/flows_transformer.safetensors",
                "height": HEIGHT, "width": WIDTH, "reference_frames": REFERENCE_FRAMES, "num_frames": FRAMES,
                "frame_rate": FPS, "seed": SEED, "reference_video": [REFERENCE_VIDEO, REFERENCE_STRENGTH],
                "reference_downscale_factor": DOWNSCALE}  # fmt: skip
    np.savez_compressed(out / "dubit.npz", settings=np.array(json.dumps(settings)), **inputs, **arrays)
    for path in sorted(out.iterdir()):
        sys.stdout.write(f"{path.name}: {path.stat().st_size} bytes\n")


if __name__ == "__main__":
    recorder_command(__doc__.split("\n", 1)[0], record, FIXTURES)
