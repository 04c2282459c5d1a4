"""Sampler pieces against ltx-core 1.0.0: schedules, token layout and positions, the Euler step,
the noiser, guidance, image conditioning, and the validation of a generation request."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from ltx_core.components.diffusion_steps import EulerDiffusionStep
from ltx_core.components.guiders import MultiModalGuider
from ltx_core.components.guiders import MultiModalGuiderParams as TorchGuiderParams
from ltx_core.components.patchifiers import AudioPatchifier, VideoLatentPatchifier
from ltx_core.components.schedulers import LTX2Scheduler
from ltx_core.conditioning.types.keyframe_cond import VideoConditionByKeyframeIndex
from ltx_core.conditioning.types.latent_cond import VideoConditionByLatentIndex
from ltx_core.tools import AudioLatentTools, VideoLatentTools
from ltx_core.types import AudioLatentShape as TorchAudioShape
from ltx_core.types import LatentState as TorchLatentState
from ltx_core.types import VideoLatentShape as TorchVideoShape
from ltx_core_twin import relative_error
from tolerances import ELEMENTWISE, LOADED_PIXELS

from ltx_jax.guidance.perturbations import BatchedPerturbationConfig, MaskedSkips, PerturbationType
from ltx_jax.pipeline import conditioning, patchifiers, pipelines, requests
from ltx_jax.pipeline.defaults import reference_guidance
from ltx_jax.pipeline.diffusion_steps import add_noise, euler_step
from ltx_jax.pipeline.guiders import MultiModalGuiderParams, combine, guidance_passes
from ltx_jax.pipeline.samplers import euler_denoising_loop, gradient_estimating_euler_denoising_loop
from ltx_jax.pipeline.schedulers import ltx2_sigmas
from ltx_jax.pipeline.stages import LatentGeometry, PromptEmbeddings, _initial_states
from ltx_jax.pipeline.types import AudioLatentShape, LatentState, VideoLatentShape, VideoPixelShape

VIDEO_SHAPE = VideoLatentShape(batch=2, channels=4, frames=3, height=2, width=5)
AUDIO_SHAPE = AudioLatentShape(batch=2, channels=2, frames=7, mel_bins=3)
FPS = 24.0


@pytest.mark.parametrize("tokens", [4096, 6144, 100])
def test_ltx2_sigmas_equal_reference_bit_for_bit(tokens):
    for steps in range(2, 61):
        reference = LTX2Scheduler().execute(steps=steps, default_number_of_tokens=tokens).numpy()
        np.testing.assert_array_equal(ltx2_sigmas(steps, tokens), reference, err_msg=f"steps={steps}")


def test_one_stretched_step_is_refused():
    with pytest.raises(ValueError, match="steps must be at least 2"):
        ltx2_sigmas(1)


def torch_state(state):
    def tensor(x):
        return None if x is None else torch.from_numpy(np.array(x, np.float32))

    return TorchLatentState(
        latent=tensor(state.latent),
        denoise_mask=tensor(state.denoise_mask),
        positions=tensor(state.positions),
        clean_latent=tensor(state.clean_latent),
        attention_mask=tensor(state.attention_mask),
    )


def video_tools(shape=VIDEO_SHAPE):
    return VideoLatentTools(VideoLatentPatchifier(patch_size=1), TorchVideoShape(*shape), FPS)


STATE_FIELDS = ("latent", "denoise_mask", "positions", "clean_latent")


def assert_states_equal(ours, reference, fields=STATE_FIELDS):
    for name in fields:
        np.testing.assert_array_equal(np.asarray(getattr(ours, name)), getattr(reference, name).numpy(), err_msg=name)
    assert (ours.attention_mask is None) == (reference.attention_mask is None)
    if ours.attention_mask is not None:
        np.testing.assert_array_equal(np.asarray(ours.attention_mask), reference.attention_mask.numpy())


def test_video_tokens_and_positions_equal_reference():
    latent = np.random.default_rng(0).standard_normal(VIDEO_SHAPE.shape).astype(np.float32)
    reference = video_tools().create_initial_state("cpu", torch.float32, torch.from_numpy(latent))
    ours = patchifiers.initial_video_state(VIDEO_SHAPE, FPS, latent)
    assert_states_equal(ours, reference)
    np.testing.assert_array_equal(patchifiers.unpatchify_video(np.asarray(ours.latent), VIDEO_SHAPE), latent)


def test_audio_tokens_and_positions_equal_reference():
    latent = np.random.default_rng(0).standard_normal(AUDIO_SHAPE.shape).astype(np.float32)
    tools = AudioLatentTools(AudioPatchifier(patch_size=1), TorchAudioShape(*AUDIO_SHAPE))
    reference = tools.create_initial_state("cpu", torch.float32, torch.from_numpy(latent))
    ours = patchifiers.initial_audio_state(AUDIO_SHAPE, latent)
    assert_states_equal(ours, reference)
    np.testing.assert_array_equal(patchifiers.unpatchify_audio(np.asarray(ours.latent), AUDIO_SHAPE), latent)


def test_latent_shapes_from_pixels_equal_reference():
    pixels = VideoPixelShape(batch=1, frames=121, height=512, width=768, fps=24.0)
    assert VideoLatentShape.from_pixel_shape(pixels) == (1, 128, 16, 16, 24)
    assert AudioLatentShape.from_video_pixel_shape(pixels) == (1, 8, 126, 16)


def test_initial_latent_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match="initial_video_latent has shape"):
        patchifiers.initial_video_state(VIDEO_SHAPE, FPS, np.zeros((1, 4, 3, 2, 5)))


def test_euler_step_equals_reference():
    rng = np.random.default_rng(0)
    sample, denoised = (rng.standard_normal((2, 30, 8)).astype(np.float32) for _ in range(2))
    sigmas = torch.tensor([1.0, 0.8, 0.3, 0.0])
    for i in range(3):
        reference = EulerDiffusionStep().step(torch.from_numpy(sample), torch.from_numpy(denoised), sigmas, i)
        ours = euler_step(sample, denoised, sigmas[i].numpy(), sigmas[i + 1].numpy())
        assert relative_error(ours, reference) <= ELEMENTWISE


def test_noiser_blends_by_mask_and_scale():
    state = patchifiers.initial_video_state(VIDEO_SHAPE, FPS, np.ones(VIDEO_SHAPE.shape, np.float32))
    mask = np.array(state.denoise_mask)
    mask[:, :3] = 0.25
    noise = np.full(state.latent.shape, 3.0, np.float32)
    noised = np.asarray(add_noise(state.replace(denoise_mask=mask), noise, 0.5).latent)
    np.testing.assert_allclose(noised[:, :3], 3.0 * 0.125 + 1.0 * 0.875)
    np.testing.assert_allclose(noised[:, 3:], 3.0 * 0.5 + 1.0 * 0.5)


def test_noiser_takes_the_clean_latent_where_the_mask_keeps_it():
    """1.2.0's `GaussianNoiser`: `lerp(clean, lerp(latent, noise, scale), mask)` (1.0.0 blended the noisy latent)."""
    state = patchifiers.initial_video_state(VIDEO_SHAPE, FPS)  # a noisy latent of zeros
    mask = np.array(state.denoise_mask)
    mask[:, :3], mask[:, 3:6] = 0.25, 0.0
    clean = np.ones(state.latent.shape, np.float32)
    noise = np.full(state.latent.shape, 4.0, np.float32)
    noised = np.asarray(add_noise(state.replace(denoise_mask=mask, clean_latent=clean), noise, 0.5).latent)
    np.testing.assert_array_equal(noised[:, :3], 1.25)  # a quarter of the way from clean (1) to 2
    np.testing.assert_array_equal(noised[:, 3:6], 1.0)
    np.testing.assert_array_equal(noised[:, 6:], 2.0)


def test_a_seed_noises_video_with_the_first_key_and_audio_with_the_second():
    """The noise a seed draws, as before it was jitted: the video's from the first of the two keys
    `jax.random.split(key)` gives, the audio's from the second, each a float32 normal in the latent
    dtype. The same seed keeps giving the same video across versions."""
    prompt = PromptEmbeddings(np.zeros((1, 4, 8), np.float32), np.zeros((1, 4, 8), np.float32))
    states = _initial_states(VideoPixelShape(1, 9, 64, 64, FPS), prompt, LatentGeometry(), jnp.bfloat16, [], [])
    key = jax.random.key(7)
    video, audio = states(key, None, None)  # zero latents, all noised at scale 1: the noise itself
    for state, modality_key in zip((video, audio), jax.random.split(key), strict=True):
        expected = jax.random.normal(modality_key, state.latent.shape, jnp.float32).astype(jnp.bfloat16)
        np.testing.assert_array_equal(np.asarray(state.latent, np.float32), np.asarray(expected, np.float32))


GUIDANCE = [
    {"cfg_scale": 3.0, "stg_scale": 1.0, "stg_blocks": [1], "rescale_scale": 0.7, "modality_scale": 3.0},
    {"cfg_scale": 7.0, "stg_scale": 0.0, "rescale_scale": 0.0, "modality_scale": 1.0},
    {"cfg_scale": 1.0, "stg_scale": 0.5, "stg_blocks": [0], "rescale_scale": 1.0, "modality_scale": 2.0},
]


@pytest.mark.parametrize("params", GUIDANCE)
def test_guidance_combination_equals_reference(params):
    rng = np.random.default_rng(0)
    outputs = {name: rng.standard_normal((2, 30, 8)).astype(np.float32) for name in ("cond", "uncond", "ptb", "mod")}
    ours_params = MultiModalGuiderParams(**params)
    present = {name for name, _ in guidance_passes(ours_params, MultiModalGuiderParams())}
    reference = MultiModalGuider(TorchGuiderParams(**params)).calculate(
        *(torch.from_numpy(outputs[n]) if n in present else 0.0 for n in ("cond", "uncond", "ptb", "mod"))
    )
    ours = combine(ours_params, {n: v for n, v in outputs.items() if n in present})
    assert relative_error(ours, reference) <= ELEMENTWISE


def test_guidance_passes_follow_the_scales():
    video = MultiModalGuiderParams(cfg_scale=3.0, stg_scale=1.0, stg_blocks=(28,), modality_scale=3.0)
    names = [name for name, _ in guidance_passes(video, MultiModalGuiderParams())]
    assert names == ["cond", "uncond", "ptb", "mod"]
    assert [name for name, _ in guidance_passes(MultiModalGuiderParams(), MultiModalGuiderParams())] == ["cond"]
    skip = MultiModalGuiderParams(skip_step=2)
    assert [skip.should_skip_step(i) for i in range(6)] == [False, True, True, False, True, True]


def test_a_guided_step_runs_one_block_program_for_all_blocks():
    """The reference's four batched passes (STG on block 28 of 48, modality isolation everywhere):
    every block is compiled for the same skips, the masks say which sample skips where, and a pass
    on its own (STG alone) still skips the attention it does not need."""
    guidance = reference_guidance(28)
    passes = BatchedPerturbationConfig(tuple(p for _, p in guidance_passes(guidance.video, guidance.audio)))
    plan = passes.masked_at_blocks(48)
    a2v, v2a, video_self, audio_self = PerturbationType
    assert {skips for skips, _ in plan} == {MaskedSkips((), (a2v, v2a, video_self, audio_self))}
    mod_skips, ptb_skips = [[1, 1, 1, 0]] * 2, [[1, 1, 0, 1]] * 2  # keep-masks of the passes in order
    np.testing.assert_array_equal(plan[28][1], mod_skips + ptb_skips)
    np.testing.assert_array_equal(plan[27][1], mod_skips + [[1, 1, 1, 1]] * 2)
    alone = BatchedPerturbationConfig((passes.perturbations[2],)).masked_at_blocks(48)
    assert alone[28][0] == MaskedSkips((video_self, audio_self))
    assert {skips for idx, (skips, _) in enumerate(alone) if idx != 28} == {MaskedSkips()}


# ltx-core 1.2.0 changed what conditionings write into the noisy latent (the noiser takes the clean latent where
# the mask keeps it): an image at a latent index leaves it as it was, appended tokens are zeros there. The other
# fields are 1.0.0's, compared live; tests/test_flows_parity.py compares whole flows with 1.2.0.
BESIDES_THE_NOISY_LATENT = ("denoise_mask", "positions", "clean_latent")


def assert_appended_tokens_are_zeros(ours, state):
    kept = state.latent.shape[1]
    np.testing.assert_array_equal(np.asarray(ours.latent)[:, :kept], np.asarray(state.latent))
    assert not np.asarray(ours.latent)[:, kept:].any()


def test_image_at_frame_zero_equals_reference():
    rng = np.random.default_rng(1)
    image = rng.standard_normal((2, 4, 1, 2, 5)).astype(np.float32)
    state = patchifiers.initial_video_state(VIDEO_SHAPE, FPS, rng.standard_normal(VIDEO_SHAPE.shape).astype(np.float32))
    ours = conditioning.condition_by_latent_index(state, image, 0.8, 0, VIDEO_SHAPE)
    item = VideoConditionByLatentIndex(latent=torch.from_numpy(image), strength=0.8, latent_idx=0)
    assert_states_equal(ours, item.apply_to(torch_state(state), video_tools()), BESIDES_THE_NOISY_LATENT)
    np.testing.assert_array_equal(np.asarray(ours.latent), np.asarray(state.latent))


@pytest.mark.parametrize("frame_idx", [0, 9])
def test_keyframe_tokens_equal_reference(frame_idx):
    keyframe = np.random.default_rng(2).standard_normal((2, 4, 1, 2, 5)).astype(np.float32)
    state = patchifiers.initial_video_state(VIDEO_SHAPE, FPS)
    ours = conditioning.condition_by_keyframe(state, keyframe, frame_idx, 0.9, FPS)
    item = VideoConditionByKeyframeIndex(keyframes=torch.from_numpy(keyframe), frame_idx=frame_idx, strength=0.9)
    reference = item.apply_to(torch_state(state), video_tools())
    assert_states_equal(ours, reference, ("denoise_mask", "clean_latent"))
    assert_appended_tokens_are_zeros(ours, state)
    assert reference.attention_mask is None
    # 1.2.0: the image spans its one pixel frame, [frame_idx, frame_idx + 1) (1.0.0: 8 frames, but at frame 0)
    positions, theirs = np.asarray(ours.positions), reference.positions.numpy()
    np.testing.assert_array_equal(positions[:, 1:], theirs[:, 1:])
    np.testing.assert_array_equal(positions[:, 0, :, 0], theirs[:, 0, :, 0])
    np.testing.assert_array_equal(positions[:, 0, 30:, 1], np.float32(frame_idx + 1) / np.float32(FPS))


@pytest.mark.parametrize("downscale_factor", [1, 2])
def test_reference_video_tokens_equal_reference(downscale_factor):
    """IC-LoRA's reference video: appended at the generated frames' times, its positions scaled back up."""
    from ltx_core.conditioning.types.reference_video_cond import VideoConditionByReferenceLatent  # noqa: PLC0415

    frames, height, width = VIDEO_SHAPE.frames, VIDEO_SHAPE.height // downscale_factor, VIDEO_SHAPE.width
    reference_latent = np.random.default_rng(3).standard_normal((2, 4, frames, height, width)).astype(np.float32)
    state = patchifiers.initial_video_state(VIDEO_SHAPE, FPS)
    ours = conditioning.condition_by_reference_latent(
        state, reference_latent, downscale_factor, 0.8, FPS, VIDEO_SHAPE.token_count()
    )
    item = VideoConditionByReferenceLatent(
        latent=torch.from_numpy(reference_latent), downscale_factor=downscale_factor, strength=0.8
    )
    reference = item.apply_to(torch_state(state), video_tools())
    assert_states_equal(ours, reference, BESIDES_THE_NOISY_LATENT)
    assert_appended_tokens_are_zeros(ours, state)
    assert reference.attention_mask is None


def test_attention_strength_masks_equal_reference():
    """An image keyframe, then two reference videos with attention-strength masks (a per-token mask, then a
    scalar), then an unmasked reference: each step's state and (B, T, T) attention mask against ltx-core's."""
    from ltx_core.conditioning.types.attention_strength_wrapper import (  # noqa: PLC0415
        ConditioningItemAttentionStrengthWrapper,
    )
    from ltx_core.conditioning.types.reference_video_cond import VideoConditionByReferenceLatent  # noqa: PLC0415

    rng = np.random.default_rng(4)
    keyframe = rng.standard_normal((2, 4, 1, 2, 5)).astype(np.float32)
    references = [rng.standard_normal((2, 4, 2, 1, 5)).astype(np.float32) for _ in range(3)]
    per_token = rng.random((2, 10)).astype(np.float32)
    ours = conditioning.condition_by_keyframe(patchifiers.initial_video_state(VIDEO_SHAPE, FPS), keyframe, 0, 1.0, FPS)
    theirs = VideoConditionByKeyframeIndex(keyframes=torch.from_numpy(keyframe), frame_idx=0, strength=1.0).apply_to(
        torch_state(patchifiers.initial_video_state(VIDEO_SHAPE, FPS)), video_tools()
    )
    for reference_latent, cross in zip(references, (per_token, 0.3, None), strict=True):

        def ours_item(state, target, latent=reference_latent):
            return conditioning.condition_by_reference_latent(state, latent, 2, 0.9, FPS, target.token_count())

        item = VideoConditionByReferenceLatent(
            latent=torch.from_numpy(reference_latent), downscale_factor=2, strength=0.9
        )
        if cross is not None:
            ours_item = conditioning.with_attention_strength(ours_item, cross)
            item = ConditioningItemAttentionStrengthWrapper(item, torch.as_tensor(cross))
        ours, theirs = ours_item(ours, VIDEO_SHAPE), item.apply_to(theirs, video_tools())
        assert_states_equal(ours, theirs, BESIDES_THE_NOISY_LATENT)
    assert ours.attention_mask.shape == (2, 30 + 10 + 3 * 10, 30 + 10 + 3 * 10)


def test_mask_downsampling_equals_reference():
    """A pixel mask over the reference video -> one weight per latent token (area, causal time groups)."""
    from torchaudio_stand_in import torchaudio_stand_in  # noqa: PLC0415

    with torchaudio_stand_in():
        from ltx_pipelines.ic_lora import ICLoraPipeline  # noqa: PLC0415
    mask = np.random.default_rng(6).random((1, 1, 17, 37, 50)).astype(np.float32)
    target = VideoLatentShape(batch=1, channels=4, frames=3, height=3, width=4)
    ours = conditioning.downsample_mask_to_latent(mask, target)
    theirs = ICLoraPipeline._downsample_mask_to_latent(torch.from_numpy(mask), TorchVideoShape(*target)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=ELEMENTWISE)


@pytest.mark.parametrize(
    ("changes", "flow", "message"),
    [
        ({"height": 100}, "one-stage", "height=100 must be a positive multiple of 32"),
        ({"width": 96}, "two-stage", "width=96 must be a positive multiple of 64"),
        ({"num_frames": 120}, "one-stage", r"num_frames=120 must be 8k\+1"),
        ({"frame_rate": 0.0}, "one-stage", "frame_rate must be positive"),
        ({}, "three-stage", "flow must be one of"),
    ],
)
def test_bad_requests_are_refused_with_the_fix(changes, flow, message):
    request = requests.Request(
        prompt=PromptEmbeddings(None, None), height=128, width=128, num_frames=9, frame_rate=24.0, seed=0
    )
    with pytest.raises(ValueError, match=message):
        pipelines.validate(dataclasses.replace(request, **changes), flow)


@pytest.mark.parametrize(("crf", "height", "width"), [(0, 64, 96), (33, 64, 96), (18, 96, 32)])
def test_image_loading_equals_ltx_pipelines(tmp_path, crf, height, width):
    """`load_image_conditioning` (read, H.264 round trip at `crf`, resize to cover, centre crop, [-1, 1])
    against ltx-pipelines' on an odd-sized RGBA image: the codec needs even sizes and drops alpha."""
    from PIL import Image  # noqa: PLC0415
    from torchaudio_stand_in import torchaudio_stand_in  # noqa: PLC0415

    from ltx_jax.pipeline.images import load_image_conditioning  # noqa: PLC0415

    with torchaudio_stand_in():
        from ltx_pipelines.utils.media_io import load_image_conditioning as reference  # noqa: PLC0415
    rng = np.random.default_rng(crf)
    smooth = np.cumsum(rng.integers(0, 5, (101, 151, 4)), axis=1) % 256  # gradients the codec keeps roughly
    path = tmp_path / "image.png"
    Image.fromarray(smooth.astype(np.uint8), "RGBA").save(path)
    ours = load_image_conditioning(path, height, width, crf)
    theirs = reference(str(path), height, width, torch.float32, torch.device("cpu"), crf=crf).numpy()
    assert ours.shape == theirs.shape == (1, 3, 1, height, width)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=LOADED_PIXELS)


def test_video_loading_equals_ltx_pipelines(tmp_path):
    """IC-LoRA's reference video: the first `frame_cap` frames, each resized to cover and centre-cropped,
    in [-1, 1], against ltx-pipelines' `load_video_conditioning`; a count that is not 8k+1 is refused."""
    from torchaudio_stand_in import torchaudio_stand_in  # noqa: PLC0415

    from ltx_jax.pipeline.media_io import write_mp4  # noqa: PLC0415
    from ltx_jax.pipeline.video_files import load_video_conditioning  # noqa: PLC0415

    with torchaudio_stand_in():
        from ltx_pipelines.utils.media_io import load_video_conditioning as reference  # noqa: PLC0415
    frames = (np.cumsum(np.random.default_rng(5).integers(0, 6, (12, 48, 70, 3)), axis=2) % 256).astype(np.uint8)
    path = tmp_path / "reference.mp4"
    write_mp4(path, frames, 24.0)
    ours = load_video_conditioning(path, 32, 64, frame_cap=9)
    theirs = reference(str(path), 32, 64, frame_cap=9, dtype=torch.float32, device=torch.device("cpu")).numpy()
    assert ours.shape == theirs.shape == (1, 3, 9, 32, 64)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=LOADED_PIXELS)
    with pytest.raises(ValueError, match="gives 12 frames \\(of the 17 requested\\).*generate 9"):
        load_video_conditioning(path, 32, 64, frame_cap=17)


def test_reference_downscale_factor_from_the_lora_metadata(tmp_path):
    """ic-lora reads `reference_downscale_factor` from each LoRA file (1 when absent); factors must agree."""
    import safetensors.numpy  # noqa: PLC0415

    from ltx_jax.convert.dit_tensors import Lora  # noqa: PLC0415
    from ltx_jax.pipeline.model_ledger import reference_downscale_factor  # noqa: PLC0415

    def lora(name, factor):
        path = tmp_path / f"{name}.safetensors"
        metadata = None if factor is None else {"reference_downscale_factor": str(factor)}
        safetensors.numpy.save_file({"w": np.zeros(1, np.float32)}, path, metadata=metadata)
        return Lora(str(path), 1.0)

    plain, half, third = lora("plain", None), lora("half", 2), lora("third", 3)
    assert reference_downscale_factor(()) == reference_downscale_factor((plain,)) == 1
    assert reference_downscale_factor((plain, half)) == 2
    with pytest.raises(ValueError, match="reference_downscale_factor values differ"):
        reference_downscale_factor((half, third))


def test_res2s_rounds_its_float64_latents_as_torch_does():
    """res_2s keeps its arithmetic in float64 and hands the DiT bf16 states, rounded as torch's
    `.to(torch.bfloat16)` rounds float64: through float32 (1 + 2^-8 + 1e-12 becomes 1, not 1 + 2^-7)."""
    from ltx_jax.pipeline import res2s  # noqa: PLC0415

    x = np.array([[[1.00390625 + 1e-12, 1.0 + 2**-9, -3.1415926535]]])
    state = patchifiers.LatentState(*(jnp.zeros((1, 1, 3), jnp.bfloat16) for _ in range(4)))
    (ours,) = res2s._with_latents([state], [x])
    np.testing.assert_array_equal(
        np.asarray(ours.latent, np.float32), torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    )


def test_gradient_estimation_loop_equals_reference():
    """ltx-pipelines' `gradient_estimating_euler_denoising_loop` (1.0.0; 1.2.0's differs only in allowing an absent
    stream) with the same x0 function: video with a conditioned token, audio, gamma 2, the last step to 0; and it
    is not plain Euler."""
    from torchaudio_stand_in import torchaudio_stand_in  # noqa: PLC0415

    with torchaudio_stand_in():
        from ltx_pipelines.utils.samplers import gradient_estimating_euler_denoising_loop as reference_loop  # noqa: PLC0415

    rng = np.random.default_rng(3)
    sigmas = np.array([1.0, 0.85, 0.6, 0.3, 0.0], np.float32)
    states = []
    for tokens in (6, 4):
        latent, clean = (rng.standard_normal((1, tokens, 8)).astype(np.float32) for _ in range(2))
        mask = np.ones((1, tokens, 1), np.float32)
        mask[:, 0] = 0.0 if tokens == 6 else 1.0  # the video's first token is conditioning
        states.append((latent, mask, clean))

    def x0(latent: np.ndarray, sigma: float) -> np.ndarray:
        return np.tanh(0.7 * latent + sigma).astype(np.float32) * 0.9

    def reference_x0(video, audio, torch_sigmas, step):
        return tuple(torch.from_numpy(x0(s.latent.numpy(), float(torch_sigmas[step]))) for s in (video, audio))

    def denoiser(video, audio, sigma, step):
        return tuple(jnp.asarray(x0(np.asarray(state.latent), sigma)) for state in (video, audio))

    def ours(loop):
        initial = (
            LatentState(*(jnp.asarray(a) for a in (latent, mask, np.zeros(1), clean))) for latent, mask, clean in states
        )
        return loop(sigmas, *initial, denoiser, progress=False)

    torch_states = [
        TorchLatentState(*(torch.from_numpy(a) for a in (latent, mask, np.zeros(1, np.float32), clean)))
        for latent, mask, clean in states
    ]
    expected = reference_loop(
        torch.from_numpy(sigmas), *torch_states, stepper=EulerDiffusionStep(), denoise_fn=reference_x0, ge_gamma=2.0
    )
    for mine, theirs in zip(ours(gradient_estimating_euler_denoising_loop), expected, strict=True):
        assert relative_error(np.asarray(mine.latent), theirs.latent) <= ELEMENTWISE
    assert relative_error(np.asarray(ours(euler_denoising_loop)[0].latent), expected[0].latent) > 1e-3
