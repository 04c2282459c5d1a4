"""The two-stage flows end to end against ltx-pipelines 1.0.0's own `__call__`, with the same noise.

The reference pipeline object runs its real `__call__` (its stage order, conditionings, sigmas,
guidance, which DiT runs which stage, which latents it decodes) on ltx-core's DiT with the tiny test
weights (IC-LoRA's stage 1 on a second DiT standing for the DiT with the IC-LoRA), in float32: its
bf16 default is swapped for float32 where it is passed (`denoise_audio_video`, the image
conditionings). What the test cannot share with ltx-jax is replaced on both sides by the same
stand-ins: the prompt contexts, the image and reference-video latents (the VAE encoder and the file
loaders have their own parity tests), a
nearest-neighbour 2x upsampler (the upsampler too). The noise ltx-jax draws (the initial noise, and
the HQ flow's res_2s SDE noise before its normalization) is recorded and replayed into the
reference's `torch.randn` calls, call by call. The final video and audio
latents (what each flow hands its decoders) must agree within DESIGN.md's float32 bound.
"""

import importlib
import types

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from ltx_core_twin import jax_model, relative_error, torch_model
from tolerances import FLOAT32
from torchaudio_stand_in import torchaudio_stand_in

import ltx_jax
from ltx_jax.pipeline import (
    AudioInput,
    Components,
    ImageCondition,
    Request,
    RetakeSpan,
    VideoCondition,
    generate,
    res2s,
    stages,
)
from ltx_jax.pipeline.guiders import MultiModalGuiderParams
from ltx_jax.pipeline.stages import Guidance, LatentGeometry, PromptEmbeddings

with torchaudio_stand_in():
    from ltx_core.components.guiders import MultiModalGuiderParams as TorchGuiderParams
    from ltx_core.model.transformer.model import X0Model
    from ltx_core.types import Audio
    from ltx_pipelines.utils import helpers, samplers
    from ltx_pipelines.utils.args import ImageConditioningInput
    from ltx_pipelines.utils.types import PipelineComponents

# 8 heads per stream; the reference's audio latent is 8 channels x 16 mel bins, so audio_in_channels is 128;
# ltx-core 1.0.0's A/V AdaLN inputs (they differ from upstream's once conditioned tokens have their own timesteps)
CFG = ltx_jax.LTXConfig.tiny(
    num_layers=2, num_attention_heads=8, attention_head_dim=8, audio_num_attention_heads=8,
    audio_attention_head_dim=4, audio_in_channels=128, audio_out_channels=128, av_ca_scale_shift_from_sigma=True,
)  # fmt: skip
GEOMETRY = LatentGeometry(video_channels=16, audio_channels=8, audio_mel_bins=16)
HEIGHT, WIDTH, FRAMES, FPS, STEPS, SEED = 128, 192, 17, 24.0, 3, 7
GUIDANCE = {
    "video": {"cfg_scale": 3.0, "stg_scale": 1.0, "stg_blocks": [1], "rescale_scale": 0.7, "modality_scale": 3.0},
    "audio": {"cfg_scale": 7.0, "stg_scale": 1.0, "stg_blocks": [0], "rescale_scale": 0.7, "modality_scale": 3.0},
}
# frame 0 and the last frame; the reference's default CRF and another (the stand-in loaders key on it)
IMAGES = (("first.png", 0, 1.0, 33), ("last.png", 16, 0.7, 18))
REFERENCE = {  # flow -> the ltx-pipelines module and class, and its image-conditioning helper
    "two-stage": ("ltx_pipelines.ti2vid_two_stages", "TI2VidTwoStagesPipeline", "combined_image_conditionings"),
    "two-stage-hq": ("ltx_pipelines.ti2vid_two_stages_hq", "TI2VidTwoStagesHQPipeline", "combined_image_conditionings"),
    "keyframe-interpolation": (
        "ltx_pipelines.keyframe_interpolation",
        "KeyframeInterpolationPipeline",
        "image_conditionings_by_adding_guiding_latent",
    ),
    "ic-lora": ("ltx_pipelines.ic_lora", "ICLoraPipeline", "combined_image_conditionings"),
    "a2vid": ("ltx_pipelines.a2vid_two_stage", "A2VidPipelineTwoStage", "combined_image_conditionings"),
    "retake": ("ltx_pipelines.retake", "RetakePipeline", None),
}
# ic-lora: a reference video at strength 0.9, encoded at half the stage-1 size (the LoRA's downscale factor 2)
REFERENCE_VIDEO, REFERENCE_STRENGTH, DOWNSCALE = "depth.mp4", 0.9, 2
# and with an attention strength and a pixel mask over its frames: (1, 1, frames, H, W) in [0, 1]
ATTENTION_STRENGTH = 0.7
ATTENTION_MASK = np.random.default_rng(9).random((1, 1, 17, 24, 40)).astype(np.float32)
# a2vid: the input waveform (what both sides read from the file) and its "encoded" latent, longer than the
# video's 18 audio latent frames (17 frames at 24 fps), as encoding the whole file gives: both cut it
AUDIO_WAVEFORM = np.random.default_rng(11).uniform(-1, 1, (2, 12000)).astype(np.float32)
AUDIO_LATENT = np.random.default_rng(12).standard_normal((1, GEOMETRY.audio_channels, 23, 16)).astype(np.float32)
# retake: the source video (its size and frames are the generation's) and the span generated again; its
# audio's latent is shorter than the video's 18 frames, so both zero-pad it
SOURCE_VIDEO, SPAN = "source.mp4", (0.3, 0.55)
RETAKE_AUDIO_LATENT = np.random.default_rng(13).standard_normal((1, GEOMETRY.audio_channels, 15, 16)).astype(np.float32)


@pytest.fixture(scope="module")
def models():
    """(torch, jax) twins: the DiT, and a second one standing for the DiT with the IC-LoRA (ic-lora's stage 1)."""
    pairs = []
    for seed in (0, 1):
        reference = torch_model(CFG, seed)
        pairs.append((reference, jax_model(CFG, reference)))
    return pairs


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(3)
    contexts = {
        name: rng.standard_normal((1, 8, width)).astype(np.float32)
        for name, width in (
            ("video", CFG.cross_attention_dim), ("video_negative", CFG.cross_attention_dim),
            ("audio", CFG.audio_cross_attention_dim), ("audio_negative", CFG.audio_cross_attention_dim),
        )
    }  # fmt: skip
    latents = {  # (image file, height, crf) -> its "encoded" latent (1, C, 1, height/32, width/32)
        (path, height, crf): rng.standard_normal(
            (1, GEOMETRY.video_channels, 1, height // 32, height * 3 // 2 // 32)
        ).astype(np.float32)
        for path, _, _, crf in IMAGES
        for height in (HEIGHT // 2, HEIGHT)
    }
    latents[(REFERENCE_VIDEO, HEIGHT // 2 // DOWNSCALE)] = rng.standard_normal(
        (1, GEOMETRY.video_channels, 3, 1, 2)
    ).astype(np.float32)
    latents[(SOURCE_VIDEO, HEIGHT)] = rng.standard_normal((1, GEOMETRY.video_channels, 3, 4, 6)).astype(np.float32)
    return contexts, latents


def upsample_nearest(latent):
    """The stand-in upsampler, for numpy/JAX and torch arrays alike: each latent pixel repeated 2x2."""
    return latent.repeat(2, axis=-1).repeat(2, axis=-2) if not isinstance(latent, torch.Tensor) else (
        latent.repeat_interleave(2, dim=-1).repeat_interleave(2, dim=-2)
    )  # fmt: skip


def run_ltx_jax(flow, models, contexts, latents, monkeypatch, skip_stage_2=False, masked=False):
    """ltx-jax's flow; returns its final latents and the noise arrays it drew, in order."""
    drawn = []
    original = stages.add_noise

    def recording(state, noise, noise_scale=1.0):
        drawn.append(np.asarray(noise))
        return original(state, noise, noise_scale)

    monkeypatch.setattr(stages, "add_noise", recording)
    monkeypatch.setattr(stages, "_noised_on_device", stages._noised_on_device.__wrapped__)  # op by op: noise recorded
    draw = res2s.SdeNoise.draw
    monkeypatch.setattr(res2s.SdeNoise, "draw", lambda self, *args: drawn.append(draw(self, *args)) or drawn[-1])
    ic_lora, a2vid, retake = flow == "ic-lora", flow == "a2vid", flow == "retake"
    audio_latent = RETAKE_AUDIO_LATENT if retake else AUDIO_LATENT
    components = Components(
        transformer=models[1][1] if ic_lora else models[0][1], stage_2_transformer=models[0][1],
        geometry=GEOMETRY, dtype=jnp.float32, upsample=lambda latent: jnp.asarray(upsample_nearest(np.asarray(latent))),
        encode_image=lambda path, height, width, crf: jnp.asarray(latents[(path, height, crf)]),
        encode_video=lambda path, height, width, frames: jnp.asarray(latents[(path, height)]),
        reference_downscale_factor=DOWNSCALE,
        encode_audio=lambda waveform, rate: jnp.asarray(audio_latent) if rate == 16000 else None,
    )  # fmt: skip
    request = Request(
        audio=AudioInput(AUDIO_WAVEFORM, 16000) if a2vid or retake else None,
        retake=RetakeSpan(SOURCE_VIDEO, *SPAN) if retake else None,
        reference_videos=(VideoCondition(REFERENCE_VIDEO, REFERENCE_STRENGTH),) if ic_lora else (),
        skip_stage_2=skip_stage_2,
        reference_attention_strength=ATTENTION_STRENGTH if masked else 1.0,
        reference_attention_mask=ATTENTION_MASK if masked else None,
        prompt=PromptEmbeddings(contexts["video"], contexts["audio"]),
        negative=PromptEmbeddings(contexts["video_negative"], contexts["audio_negative"]),
        height=HEIGHT, width=WIDTH, num_frames=FRAMES, frame_rate=FPS, seed=SEED, num_inference_steps=STEPS,
        guidance=Guidance(*(MultiModalGuiderParams(**GUIDANCE[m]) for m in ("video", "audio"))),
        images=() if retake else tuple(ImageCondition(*image) for image in IMAGES),
    )  # fmt: skip
    video, audio = generate(components, request, flow)
    monkeypatch.undo()
    return (np.asarray(video), np.asarray(audio)), drawn


def run_reference(flow, models, contexts, latents, noise, monkeypatch, skip_stage_2=False, masked=False):
    """ltx-pipelines' `__call__` for `flow`, with the stand-ins of this module's docstring."""
    module_name, class_name, conditionings = REFERENCE[flow]
    with torchaudio_stand_in():
        module = importlib.import_module(module_name)
    replay = iter(noise)
    decoded = {}

    def encoder(marker):  # the reference encodes what load_image_conditioning returned: here a key
        return torch.from_numpy(latents[marker])

    ic_lora, a2vid, retake = flow == "ic-lora", flow == "a2vid", flow == "retake"
    ledgers = [
        types.SimpleNamespace(
            transformer=lambda dit=dit: X0Model(dit),
            video_encoder=lambda: encoder,
            spatial_upsampler=lambda: None,
            video_decoder=lambda: None,
            audio_decoder=lambda: None,
            vocoder=lambda: None,
            audio_encoder=lambda: "audio encoder",
        )  # fmt: skip
        for dit in (models[1][0] if ic_lora else models[0][0], models[0][0])
    ]

    def prompts(texts, *args, **kwargs):
        assert texts == (["prompt"] if ic_lora else ["prompt", "negative"])
        return [
            types.SimpleNamespace(video_encoding=torch.from_numpy(contexts[f"video{s}"]),
                                  audio_encoding=torch.from_numpy(contexts[f"audio{s}"]))
            for s in ("", "_negative")[: len(texts)]
        ]  # fmt: skip

    def float32(fn):
        return lambda *args, **kwargs: fn(*args, **{**kwargs, "dtype": torch.float32})

    monkeypatch.setattr(module, "encode_prompts", prompts)
    if not retake:  # retake builds its states with self.dtype
        denoise = "denoise_video_only" if a2vid else "denoise_audio_video"
        monkeypatch.setattr(module, denoise, float32(getattr(helpers, denoise)))
        monkeypatch.setattr(module, conditionings, float32(getattr(helpers, conditionings)))
    if a2vid or retake:  # the file's waveform, and its latent from the audio encoder the ledger gives
        audio_file = Audio(waveform=torch.from_numpy(AUDIO_WAVEFORM)[None], sampling_rate=16000)
        path = SOURCE_VIDEO if retake else "a.wav"
        monkeypatch.setattr(module, "decode_audio_from_file", lambda p, *_: audio_file if p == path else None)
        audio_latent = torch.from_numpy(RETAKE_AUDIO_LATENT if retake else AUDIO_LATENT)
        monkeypatch.setattr(
            module, "vae_encode_audio", lambda audio, encoder, *_: audio_latent if encoder == "audio encoder" else None
        )
    if hasattr(module, "res2s_audio_video_denoising_loop"):  # it rounds the states to bf16 by default
        loop = samplers.res2s_audio_video_denoising_loop
        monkeypatch.setattr(
            module, "res2s_audio_video_denoising_loop", lambda **kw: loop(**kw, model_dtype=torch.float32)
        )
    monkeypatch.setattr(
        helpers, "load_image_conditioning", lambda image_path, height, crf, **_: (image_path, height, crf)
    )
    if ic_lora or retake:
        monkeypatch.setattr(module, "load_video_conditioning", lambda video_path, height, **_: (video_path, height))
    if retake:
        monkeypatch.setattr(module, "get_videostream_metadata", lambda path: (FPS, FRAMES, WIDTH, HEIGHT))
    else:
        monkeypatch.setattr(module, "upsample_video", lambda latent, video_encoder, upsampler: upsample_nearest(latent))
    monkeypatch.setattr(module, "vae_decode_video", lambda latent, *_: decoded.setdefault("video", latent))
    if not a2vid:
        monkeypatch.setattr(module, "vae_decode_audio", lambda latent, *_: decoded.setdefault("audio", latent))
    monkeypatch.setattr(module, "cleanup_memory", lambda: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch, "randn", lambda *args, **kwargs: torch.tensor(next(replay)))
    pipeline = object.__new__(getattr(module, class_name))
    pipeline.device = torch.device("cpu")
    pipeline.pipeline_components = PipelineComponents(dtype=torch.float32, device=torch.device("cpu"))
    pipeline.pipeline_components.video_latent_channels = GEOMETRY.video_channels
    pipeline.stage_1_model_ledger, pipeline.stage_2_model_ledger = ledgers
    pipeline.model_ledger = ledgers[0]
    pipeline.dtype, pipeline.reference_downscale_factor = torch.float32, DOWNSCALE
    arguments = {"prompt": "prompt", "seed": SEED, "height": HEIGHT, "width": WIDTH, "num_frames": FRAMES,
                 "frame_rate": FPS, "images": [ImageConditioningInput(*image) for image in IMAGES]}  # fmt: skip
    if retake:  # the size and frames come from the source video
        arguments = {
            "video_path": SOURCE_VIDEO, "prompt": "prompt", "start_time": SPAN[0], "end_time": SPAN[1], "seed": SEED,
            "negative_prompt": "negative", "num_inference_steps": STEPS,
            **{f"{m}_guider_params": TorchGuiderParams(**GUIDANCE[m]) for m in ("video", "audio")},
        }  # fmt: skip
    elif ic_lora:
        arguments.update(video_conditioning=[(REFERENCE_VIDEO, REFERENCE_STRENGTH)], skip_stage_2=skip_stage_2)
        if masked:
            arguments.update(
                conditioning_attention_strength=ATTENTION_STRENGTH,
                conditioning_attention_mask=torch.from_numpy(ATTENTION_MASK),
            )
    else:
        arguments.update(
            negative_prompt="negative", num_inference_steps=STEPS,
            video_guider_params=TorchGuiderParams(**GUIDANCE["video"]),
        )  # fmt: skip
        if a2vid:  # the audio is fixed: no audio guidance
            arguments.update(audio_path="a.wav", audio_max_duration=FRAMES / FPS)
        else:
            arguments["audio_guider_params"] = TorchGuiderParams(**GUIDANCE["audio"])
    with torch.no_grad():
        _, original_audio = pipeline(**arguments)
    if a2vid:  # it returns the file's audio, not a decoded one
        decoded["audio"] = original_audio.waveform
    monkeypatch.undo()
    assert next(replay, None) is None, "the reference drew fewer noise arrays than ltx-jax"
    return decoded["video"].numpy(), decoded["audio"].numpy()


@pytest.mark.parametrize(
    ("flow", "skip_stage_2", "masked"),
    [("two-stage", False, False), ("two-stage-hq", False, False), ("keyframe-interpolation", False, False),
     ("ic-lora", False, False), ("ic-lora", True, True), ("a2vid", False, False), ("retake", False, False)],
)  # fmt: skip
def test_flow_equals_ltx_pipelines(flow, skip_stage_2, masked, models, inputs, monkeypatch):
    contexts, latents = inputs
    ours, noise = run_ltx_jax(flow, models, contexts, latents, monkeypatch, skip_stage_2, masked)
    # video and audio, each stage; res_2s also 4 per step (stage 1: STEPS, stage 2: 3)
    one_stage = skip_stage_2 or flow == "retake"
    assert len(noise) == (2 if one_stage else 4) + (4 * (STEPS + 3) if flow == "two-stage-hq" else 0)
    reference = run_reference(flow, models, contexts, latents, noise, monkeypatch, skip_stage_2, masked)
    if flow == "a2vid":  # the reference hands back the file's waveform; ltx-jax the kept latent, unchanged
        np.testing.assert_array_equal(reference[1], AUDIO_WAVEFORM)
        np.testing.assert_array_equal(ours[1], AUDIO_LATENT[:, :, :18])
        ours, reference = ours[:1], reference[:1]
    for name, mine, theirs in zip(("video", "audio")[: len(ours)], ours, reference, strict=True):
        assert mine.shape == theirs.shape, name
        assert relative_error(mine, theirs) <= FLOAT32, name


def test_keyframe_interpolation_keeps_frame_zero_as_a_keyframe(models, inputs, monkeypatch):
    """Frame 0 as a guiding keyframe (appended tokens) is not frame 0 replacing the first latent frame."""
    contexts, latents = inputs
    keyframes, _ = run_ltx_jax("keyframe-interpolation", models, contexts, latents, monkeypatch)
    replaced, _ = run_ltx_jax("two-stage", models, contexts, latents, monkeypatch)
    assert relative_error(keyframes[0], replaced[0]) > 0.01
