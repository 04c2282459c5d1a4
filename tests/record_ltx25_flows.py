"""Records ltx-pipelines 1.2.0's flows on a tiny random LTX-2.5 DiT into tests/fixtures/ltx25_flows/ (CI has no 1.2.0).

Each flow is the reference pipeline class, built by its own constructor and run through its own `__call__` on the
CPU in float32; only what ltx-jax tests elsewhere is stood in for (below). Confirm the fixtures with `--check`: it
records again into a temporary folder and compares every array (environment: see record_ltx25_fixtures.py):

    python tests/record_ltx25_flows.py [--check]    # from the project root

flows_transformer.safetensors   a 2-block LTX-2.5 DiT (`model.diffusion_model.*`, float32; metadata `config` and
    `model_version` 2.5.0), 8 heads per stream (8x8 video, 8x4 audio), contexts 64/32 wide, 128 latent channels
    each way, LTX-2.5's switches as record_ltx25_fixtures.transformer_metadata() has them; the keyframe
    embedding is random, not zero. No text connectors: the flows get contexts directly. The one key a
    transformer-only build needs beyond those is `caption_proj_before_connector: true` (else 1.2.0's
    configurator builds a V1 caption projection and asks for `caption_channels`).
flows.npz   `settings` (JSON), the stand-ins' inputs `input__*` (contexts (1, 8, 64|32) from default_rng(3),
    then from the same generator the image latents `input__image_{first|last}_{64|128}` (1, 128, 1, h/32, w/32),
    `input__reference_video` (1, 128, 2, 1, 1), `input__audio_latent` (1, 8, 13, 16) (a2vid, longer than the
    video's 9 audio frames), `input__source_video` (1, 128, 2, 4, 4), `input__source_audio` (1, 8, 6, 16)
    (retake, shorter); `input__attention_mask` (1, 1, 9, 32, 32) from default_rng(9): the reference video's
    pixel frames at its size, half the stage-1 size), and per flow:
    {flow}__video (1, 128, F, H, W), {flow}__audio (1, 8, T, 16)   what the pipeline hands its decoders
    {flow}__noise_{i}, {flow}__noise_kinds   every torch.randn draw in call order, as drawn, and its caller:
        noiser (GaussianNoiser, float32), ancestral (the Euler-ancestral loop, float32), res2s_step /
        res2s_substep (res_2s's float64 draw before its normalisation)
    a2vid decodes no audio (it returns the input waveform): its __audio is the latent its stage 2 returns.

Stand-ins (module attributes patched for the run): the prompt encoder returns the contexts (prompt, then the
negative where the flow encodes one); image loading returns a key and the video encoder maps it to its latent,
likewise the reference video (ic-lora), the source video and its audio (retake; the real video_latent_from_file /
audio_latent_from_file conform them) and the audio file (a2vid; the pipeline cuts it); the x2 upsampler repeats
each latent pixel 2x2; the decoders keep the latent and decode nothing (the decoder's noise is never drawn).
Every stage is DiffusionStage.from_checkpoint on flows_transformer.safetensors, float32, CPU, WITHOUT its LoRAs
(the distilled LoRA of stage 2, the IC-LoRA: the plain DiT runs; the IC-LoRA file read for its metadata is a
stand-in whose `reference_downscale_factor` is 2). The pipelines' hard-coded bfloat16 becomes float32 (their
module `torch` is a proxy whose bfloat16 is float32), and the HQ flow's res_2s loop gets model_dtype float32.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import json
import sys
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "ltx25_flows"
sys.path.insert(0, str(HERE))
from record_ltx25_fixtures import (  # noqa: E402
    _REQUIRED,
    _json_values,
    randomize,
    recorder_command,
    transformer_metadata,
)
from torchaudio_stand_in import torchaudio_stand_in  # noqa: E402

with torchaudio_stand_in():
    from ltx_core.components.guiders import MultiModalGuiderParams
    from ltx_core.loader import LoraPathStrengthAndSDOps
    from ltx_core.loader.sd_ops import LTXV_LORA_COMFY_RENAMING_MAP
    from ltx_core.model.transformer import LTXModelConfigurator
    from ltx_core.model.video_vae.transformer import DiffVAEMode
    from ltx_core.types import VIDEO_SCALE_FACTORS, Audio, AudioLatentShape, VideoPixelShape
    from ltx_pipelines import iclora_utils
    from ltx_pipelines.utils import blocks, helpers, samplers
    from ltx_pipelines.utils.args import ImageConditioningInput
    from ltx_pipelines.utils.model_paths import ModelPaths
    from safetensors.torch import save_file

FLOWS = {  # ltx-jax flow -> 1.2.0 module and class
    "one-stage": ("ti2vid_one_stage", "TI2VidOneStagePipeline"),
    "two-stage": ("ti2vid_two_stages", "TI2VidTwoStagesPipeline"),
    "two-stage-hq": ("ti2vid_two_stages_hq", "TI2VidTwoStagesHQPipeline"),
    "distilled": ("distilled", "DistilledPipeline"),
    "keyframe-interpolation": ("keyframe_interpolation", "KeyframeInterpolationPipeline"),
    "ic-lora": ("ic_lora", "ICLoraPipeline"),
    "ic-lora-masked": ("ic_lora", "ICLoraPipeline"),
    "a2vid": ("a2vid_two_stage", "A2VidPipelineTwoStage"),
    "retake": ("retake", "RetakePipeline"),
    "retake-guided": ("retake", "RetakePipeline"),
    "retake-guided-keep-audio": ("retake", "RetakePipeline"),
}
with torchaudio_stand_in():
    MODULES = {module: importlib.import_module(f"ltx_pipelines.{module}") for module, _ in FLOWS.values()}
WEIGHTS_SEED, SEED = 0, 7
HEIGHT, WIDTH, FRAMES, FPS, STEPS = 128, 128, 9, 24.0, 3
GUIDANCE = {
    "video": {"cfg_scale": 3.0, "stg_scale": 1.0, "stg_blocks": [1], "rescale_scale": 0.7, "modality_scale": 3.0},
    "audio": {"cfg_scale": 7.0, "stg_scale": 1.0, "stg_blocks": [0], "rescale_scale": 0.7, "modality_scale": 3.0},
}
IMAGES = (("first.png", 0, 1.0, 33), ("last.png", 8, 0.7, 18))  # path, frame_idx, strength, crf
REFERENCE_VIDEO, REFERENCE_STRENGTH, DOWNSCALE, ATTENTION_STRENGTH = "reference.mp4", 0.9, 2, 0.7
SOURCE_VIDEO, SPAN, AUDIO_FILE = "source.mp4", (0.1, 0.25), "input.wav"
AUDIO_FRAMES = AudioLatentShape.from_duration(batch=1, duration=FRAMES / FPS).frames  # 9
CPU = torch.device("cpu")
_RANDN = torch.randn


def flows_metadata() -> dict:
    """record_ltx25_fixtures' LTX-2.5 DiT config without its text-path keys, at 8 heads per stream."""
    text_path = ("caption_", "connector_", "audio_connector_", "text_encoder_norm_type", "use_embeddings_connector")
    base = {k: v for k, v in transformer_metadata()["config"]["transformer"].items() if not k.startswith(text_path)}
    config = {
        **base, **_REQUIRED, "num_attention_heads": 8, "attention_head_dim": 8, "audio_num_attention_heads": 8,
        "audio_attention_head_dim": 4, "cross_attention_dim": 64, "audio_cross_attention_dim": 32, "num_layers": 2,
        "in_channels": 128, "out_channels": 128, "audio_in_channels": 128, "audio_out_channels": 128,
        "caption_proj_before_connector": True,
    }  # fmt: skip
    return {"config": {"transformer": config}, "model_version": "2.5.0"}


def write_transformer(path: Path) -> None:
    metadata = flows_metadata()
    with torch.device("cpu"):
        weights = randomize(LTXModelConfigurator.from_metadata(metadata), torch.Generator().manual_seed(WEIGHTS_SEED))
    assert (weights["keyframes_abs_pos_embedding"] != 0).all()
    tensors = {f"model.diffusion_model.{k}": v.contiguous() for k, v in weights.items()}
    save_file(tensors, str(path), metadata=_json_values(metadata))


def make_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    widths = (("video", 64), ("video_negative", 64), ("audio", 32), ("audio_negative", 32))
    inputs = {f"input__context_{name}": rng.standard_normal((1, 8, width)) for name, width in widths}
    for path, *_ in IMAGES:
        for size in (HEIGHT // 2, HEIGHT):
            inputs[f"input__image_{Path(path).stem}_{size}"] = rng.standard_normal((1, 128, 1, size // 32, size // 32))
    inputs["input__reference_video"] = rng.standard_normal((1, 128, 2, 1, 1))
    inputs["input__audio_latent"] = rng.standard_normal((1, 8, AUDIO_FRAMES + 4, 16))
    inputs["input__source_video"] = rng.standard_normal((1, 128, 2, HEIGHT // 32, WIDTH // 32))
    inputs["input__source_audio"] = rng.standard_normal((1, 8, AUDIO_FRAMES - 3, 16))
    inputs["input__attention_mask"] = np.random.default_rng(9).random((1, 1, FRAMES, 32, 32))
    return {k: v.astype(np.float32) for k, v in inputs.items()}


def _caller(frame: types.FrameType | None, name: str) -> types.FrameType | None:
    while frame is not None and frame.f_code.co_name != name:
        frame = frame.f_back
    return frame


def _draw_kind(frame: types.FrameType, generator: torch.Generator | None) -> str:
    """Which caller made a torch.randn draw; any other caller fails the recording."""
    name = frame.f_code.co_name
    if name == "_sample_noise" and "noisers" in frame.f_code.co_filename:
        return "noiser"
    if name == "_get_plain_noise" and _caller(frame, "_ancestral_euler_denoising_loop"):
        return "ancestral"
    loop = _caller(frame, "res2s_audio_video_denoising_loop") if name == "_get_new_noise" else None
    if loop is not None:
        for kind in ("step", "substep"):
            if generator is loop.f_locals[f"{kind}_noise_generator"]:
                return f"res2s_{kind}"
    raise AssertionError(f"torch.randn drawn by {name} ({frame.f_code.co_filename}) is not accounted for")


class _Draws:
    """torch.randn, keeping each draw and its caller's kind."""

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.tensors: list[torch.Tensor] = []

    def __call__(self, *args: object, **kwargs: object) -> torch.Tensor:
        tensor = _RANDN(*args, **kwargs)
        self.kinds.append(_draw_kind(sys._getframe(1), kwargs.get("generator")))
        self.tensors.append(tensor.clone())
        return tensor


class _Encoder:
    """The video encoder: maps the key the stand-in loaders returned to its latent."""

    video_scale_factors = VIDEO_SCALE_FACTORS

    def __init__(self, inputs: dict[str, np.ndarray]) -> None:
        self.inputs = inputs

    def __call__(self, key: str, _tiling: object = None) -> torch.Tensor:
        return torch.from_numpy(self.inputs[key].copy())

    tiled_encode = __call__

    def dispose(self) -> None:
        pass


class _ImageConditioner(blocks.ImageConditioner):
    """1.2.0's ImageConditioner (its CRF resolution, its encoder lifecycle) building the stand-in encoder."""

    def __init__(self, checkpoint_path: str, encoder: _Encoder) -> None:
        self._checkpoint_path, self._default_image_crf, self._encoder = checkpoint_path, None, encoder
        self._alloc_trim_strategy = blocks.AllocatorTrimStrategy.TRIM

    def _build_encoder(self) -> _Encoder:
        return self._encoder


class _Decoder:
    """A decoder block: keeps the latent it is handed and decodes nothing."""

    def __init__(self, kept: dict[str, torch.Tensor], name: str, checkpoint_path: str) -> None:
        self.kept, self.name, self.checkpoint_path = kept, name, checkpoint_path
        self.diffvae_optimization = DiffVAEMode.CHUNKED_EAGER

    def __call__(self, latent: torch.Tensor, *_: object, **__: object) -> Iterator[torch.Tensor]:
        assert self.name not in self.kept
        self.kept[self.name] = latent.clone()
        return iter(())


def _float32_torch() -> types.ModuleType:
    """`torch` for the pipeline modules, its bfloat16 being float32."""
    proxy = types.ModuleType("torch_with_float32_for_bfloat16")
    proxy.__getattr__ = lambda name: getattr(torch, name)
    proxy.bfloat16 = torch.float32
    return proxy


def _image_file(image_path: str, height: int, width: int, crf: int, **_: object) -> str:
    assert (image_path, crf) in {(path, c) for path, _, _, c in IMAGES}, (image_path, crf)
    assert width == height
    return f"input__image_{Path(image_path).stem}_{height}"


def _video_frames(frames: str, height: int, width: int, *_: object) -> str:
    return {(SOURCE_VIDEO, HEIGHT, WIDTH): "input__source_video",
            (REFERENCE_VIDEO, HEIGHT // 2 // DOWNSCALE, WIDTH // 2 // DOWNSCALE): "input__reference_video"}[
        (frames, height, width)]  # fmt: skip


def _upsample(latent: torch.Tensor) -> torch.Tensor:
    return latent.repeat_interleave(2, dim=-1).repeat_interleave(2, dim=-2)


class _Run:
    """The stand-ins of one flow's run and what they kept."""

    def __init__(self, flow: str, inputs: dict[str, np.ndarray]) -> None:
        self.flow, self.inputs, self.encoder = flow, inputs, _Encoder(inputs)
        self.prompts: list[list[str]] = []
        self.kept: dict[str, torch.Tensor] = {}
        self.stages: list[blocks.RecordingDiffusionStage] = []
        self.dropped_loras: list[tuple[str, ...]] = []
        self.draws = _Draws()
        self.audio_file = Audio(waveform=torch.zeros(1, 2, 160), sampling_rate=16000)

    def encode_prompts(self, prompts: list[str], **_: object) -> list[types.SimpleNamespace]:
        self.prompts.append(list(prompts))
        names = {"prompt": "", "negative": "_negative"}
        return [types.SimpleNamespace(video_encoding=torch.from_numpy(self.inputs[f"input__context_video{names[p]}"]),
                                      audio_encoding=torch.from_numpy(self.inputs[f"input__context_audio{names[p]}"]))
                for p in prompts]  # fmt: skip

    def stage(self, checkpoint_path: str, dtype: torch.dtype, device: torch.device, loras: tuple = (), **kwargs):
        """DiffusionStage.from_checkpoint, the LoRAs left out."""
        assert dtype == torch.float32, dtype
        self.dropped_loras.append(tuple(Path(lora.path).name for lora in loras))
        stage = blocks.DiffusionStage.from_checkpoint(checkpoint_path, dtype, device, **kwargs)
        self.stages.append(blocks.RecordingDiffusionStage(stage))
        return self.stages[-1]

    def decode_audio_file(self, path: str, *_: object) -> Audio:
        assert path == (SOURCE_VIDEO if self.flow.startswith("retake") else AUDIO_FILE)
        return self.audio_file

    def encode_audio(self, audio: Audio, encoder: str, *_: object) -> torch.Tensor:
        assert audio is self.audio_file
        assert encoder == "audio encoder"
        return self.encoder("input__source_audio" if self.flow.startswith("retake") else "input__audio_latent")

    def patches(self, module: types.ModuleType) -> list[tuple[object, str, object]]:
        shape = VideoPixelShape(batch=1, frames=FRAMES, height=HEIGHT, width=WIDTH, fps=FPS)
        in_module = {
            "torch": _float32_torch(),
            "PromptEncoder": lambda *_, **__: self.encode_prompts,
            "ImageConditioner": lambda path, *_, **__: _ImageConditioner(path, self.encoder),
            "VideoUpsampler": lambda *_, **__: _upsample,
            "VideoDecoder": lambda path, *_, **__: _Decoder(self.kept, "video", path),
            "AudioDecoder": lambda path, *_, **__: _Decoder(self.kept, "audio", path),
            "AudioConditioner": lambda *_, **__: lambda fn: fn("audio encoder"),
            "DiffusionStage": types.SimpleNamespace(from_checkpoint=self.stage),
            "decode_audio_from_file": self.decode_audio_file,
            "vae_encode_audio": self.encode_audio,
            "get_videostream_metadata": lambda path, **_: shape if path == SOURCE_VIDEO else None,
            "res2s_audio_video_denoising_loop": functools.partial(
                samplers.res2s_audio_video_denoising_loop, model_dtype=torch.float32
            ),
        }
        return [
            *((module, name, value) for name, value in in_module.items() if hasattr(module, name)),
            (helpers, "load_image_and_preprocess", _image_file),
            (helpers, "get_videostream_fps", lambda path: FPS if path == SOURCE_VIDEO else None),
            (helpers, "decode_video_from_file", lambda path, **_: path),
            (helpers, "video_preprocess", _video_frames),
            (helpers, "decode_audio_from_file", self.decode_audio_file),
            (helpers, "encode_audio", self.encode_audio),
            (iclora_utils, "decode_video_by_frame", lambda path, **_: path),
            (iclora_utils, "video_preprocess", _video_frames),
            (samplers, "tqdm", lambda iterable, *_, **__: iterable),
            (torch, "randn", self.draws),
        ]


def constructor_arguments(flow: str, cls: type, paths: ModelPaths, lora: LoraPathStrengthAndSDOps) -> dict:
    """The stand-in LoRA wherever the constructor takes one (only its metadata is read); retake distilled (its
    default) unless guided."""
    optional = {"distilled_lora": [lora], "distilled_lora_strength_stage_1": 0.25,
                "distilled_lora_strength_stage_2": 0.5, "spatial_upsampler_path": "upsampler.safetensors",
                "distilled": not flow.startswith("retake-guided")}  # fmt: skip
    params = inspect.signature(cls.__init__).parameters
    return {"model_paths": paths, "loras": [lora] if flow.startswith("ic-lora") else [], "device": CPU,
            **{name: value for name, value in optional.items() if name in params}}  # fmt: skip


def call_arguments(flow: str, cls: type, mask: np.ndarray) -> dict:
    params = inspect.signature(cls.__call__).parameters
    arguments = {"prompt": "prompt", "seed": SEED, "tiling_config": None}
    if flow.startswith("retake"):
        arguments.update(video_path=SOURCE_VIDEO, start_time=SPAN[0], end_time=SPAN[1],
                         regenerate_audio=flow in ("retake", "retake-guided"))  # fmt: skip
    else:
        arguments.update(height=HEIGHT, width=WIDTH, num_frames=FRAMES, frame_rate=FPS,
                         images=[ImageConditioningInput(*image) for image in IMAGES])  # fmt: skip
    if "negative_prompt" in params:
        arguments.update(negative_prompt="negative", num_inference_steps=STEPS)
    for modality in ("video", "audio"):
        if f"{modality}_guider_params" in params:
            arguments[f"{modality}_guider_params"] = MultiModalGuiderParams(**GUIDANCE[modality])
    if flow == "a2vid":
        arguments["audio_path"] = AUDIO_FILE
    if flow.startswith("ic-lora"):
        arguments["video_conditioning"] = [(REFERENCE_VIDEO, REFERENCE_STRENGTH)]
    if flow == "ic-lora-masked":
        arguments.update(conditioning_attention_strength=ATTENTION_STRENGTH, skip_stage_2=True,
                         conditioning_attention_mask=torch.from_numpy(mask))  # fmt: skip
    return arguments


def run_flow(flow: str, inputs: dict[str, np.ndarray], paths: ModelPaths, lora: LoraPathStrengthAndSDOps) -> dict:
    """The reference's `__call__` for `flow`; returns its fixture arrays."""
    module = MODULES[FLOWS[flow][0]]
    run, rng_state = _Run(flow, inputs), torch.random.get_rng_state()
    with contextlib.ExitStack() as stack:
        for target, name, value in run.patches(module):
            stack.enter_context(mock.patch.object(target, name, value))
        cls = getattr(module, FLOWS[flow][1])
        pipeline = cls(**constructor_arguments(flow, cls, paths, lora))
        with torch.inference_mode():
            pipeline(**call_arguments(flow, cls, inputs["input__attention_mask"]))
    assert torch.equal(rng_state, torch.random.get_rng_state()), "something drew from torch's global generator"
    negative = "negative_prompt" in inspect.signature(cls.__call__).parameters and not getattr(pipeline, "distilled", 0)
    assert run.prompts == [["prompt", "negative"] if negative else ["prompt"]], run.prompts
    if flow == "distilled":
        assert pipeline.use_ancestral_sampler
        assert "ancestral" in run.draws.kinds
    if flow == "a2vid":  # the input waveform is returned; keep the (frozen) audio its last stage returns
        run.kept["audio"] = run.stages[-1].audio_states[-1].latent.clone()
    check(flow, run)
    arrays = {f"{flow}__{name}": run.kept[name].numpy() for name in ("video", "audio")}
    arrays.update({f"{flow}__noise_{i}": tensor.numpy() for i, tensor in enumerate(run.draws.tensors)})
    arrays[f"{flow}__noise_kinds"] = np.array(run.draws.kinds)
    return arrays


def check(flow: str, run: _Run) -> None:
    for name, latent in run.kept.items():
        assert latent.dtype == torch.float32, (flow, name)
        assert torch.isfinite(latent).all(), (flow, name)
    for kind, tensor in zip(run.draws.kinds, run.draws.tensors, strict=True):
        assert tensor.dtype == (torch.float64 if kind.startswith("res2s") else torch.float32), (flow, kind)
    calls = [state for stage in run.stages for state in stage.audio_states]  # stages are called in build order
    audio_from = [f"stage call {i + 1}" for i, a in enumerate(calls) if torch.equal(a.latent, run.kept["audio"])]
    counts = {kind: run.draws.kinds.count(kind) for kind in dict.fromkeys(run.draws.kinds)}
    sys.stdout.write(f"{flow}: video {tuple(run.kept['video'].shape)}, audio {tuple(run.kept['audio'].shape)} "
                     f"(that of {', '.join(audio_from) or 'no stage'}), draws {counts}, "
                     f"LoRAs left out {run.dropped_loras}\n")  # fmt: skip


def record(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    transformer = out / "flows_transformer.safetensors"
    write_transformer(transformer)
    inputs, arrays = make_inputs(), {}
    paths = ModelPaths.from_split(transformer_path=str(transformer), video_vae_path=str(transformer),
                                  audio_vae_path=str(transformer))  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        lora_path = Path(tmp) / "lora_stand_in.safetensors"  # read for its metadata only; never fused
        save_file({"unused": torch.zeros(1)}, str(lora_path), metadata={"reference_downscale_factor": str(DOWNSCALE)})
        lora = LoraPathStrengthAndSDOps(str(lora_path), 1.0, LTXV_LORA_COMFY_RENAMING_MAP)
        for flow in FLOWS:
            arrays.update(run_flow(flow, inputs, paths, lora))
        again = run_flow("distilled", inputs, paths, lora)
    assert all(np.array_equal(value, arrays[key]) for key, value in again.items()), "two runs differ"
    settings = {"reference": "ltx-pipelines 1.2.0", "height": HEIGHT, "width": WIDTH, "num_frames": FRAMES,
                "frame_rate": FPS, "seed": SEED, "num_inference_steps": STEPS, "guidance": GUIDANCE,
                "images": IMAGES, "reference_video": [REFERENCE_VIDEO, REFERENCE_STRENGTH],
                "reference_downscale_factor": DOWNSCALE, "attention_strength": ATTENTION_STRENGTH,
                "retake_span": SPAN, "flows": FLOWS}  # fmt: skip
    np.savez_compressed(out / "flows.npz", settings=np.array(json.dumps(settings)), **inputs, **arrays)
    for path in sorted(out.iterdir()):
        sys.stdout.write(f"{path.name}: {path.stat().st_size} bytes\n")


if __name__ == "__main__":
    recorder_command(__doc__.split("\n", 1)[0], record, FIXTURES)
