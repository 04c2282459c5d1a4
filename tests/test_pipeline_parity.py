"""The guided Euler sampler against ltx-pipelines 1.0.0 (under sequence parallelism: a guided generation in
tests/test_generate.py, a padded unguided one against 1.2.0 in tests/test_flows_parity.py).

ltx-pipelines imports ltx-core's audio VAE, which imports torchaudio at package import; the
stand-in (tests/torchaudio_stand_in.py) lets that import succeed and raises if anything calls it.
Nothing here does.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from ltx_core.components.diffusion_steps import EulerDiffusionStep
from ltx_core.components.guiders import MultiModalGuider
from ltx_core.components.guiders import MultiModalGuiderParams as TorchGuiderParams
from ltx_core.model.transformer.model import X0Model
from ltx_core.types import LatentState as TorchLatentState
from ltx_core_twin import jax_model, relative_error, torch_model
from tolerances import FLOAT32
from torchaudio_stand_in import torchaudio_stand_in

import ltx_jax
from ltx_jax.parallel import SequenceParallel, make_mesh
from ltx_jax.pipeline import patchifiers, schedulers
from ltx_jax.pipeline.denoisers import GuidedDenoiser, every_token_generated
from ltx_jax.pipeline.diffusion_steps import add_noise
from ltx_jax.pipeline.guiders import MultiModalGuiderParams
from ltx_jax.pipeline.samplers import euler_denoising_loop
from ltx_jax.pipeline.stages import LatentGeometry
from ltx_jax.pipeline.types import AudioLatentShape, VideoLatentShape, VideoPixelShape

with torchaudio_stand_in():
    from ltx_pipelines.utils.constants import DISTILLED_SIGMA_VALUES, STAGE_2_DISTILLED_SIGMA_VALUES
    from ltx_pipelines.utils.helpers import multi_modal_guider_denoising_func
    from ltx_pipelines.utils.samplers import euler_denoising_loop as reference_loop

CFG = ltx_jax.LTXConfig.tiny(  # 8 heads per stream, so that SP(8) applies
    num_layers=2, num_attention_heads=8, attention_head_dim=8, audio_num_attention_heads=8, audio_attention_head_dim=4
)
PIXELS = VideoPixelShape(batch=1, frames=17, height=64, width=96, fps=24.0)
GEOMETRY = LatentGeometry(video_channels=16, audio_channels=4, audio_mel_bins=4)
VIDEO_GUIDANCE = {"cfg_scale": 3.0, "stg_scale": 1.0, "stg_blocks": [1], "rescale_scale": 0.7, "modality_scale": 3.0}
AUDIO_GUIDANCE = {"cfg_scale": 7.0, "stg_scale": 1.0, "stg_blocks": [0], "rescale_scale": 0.7, "modality_scale": 3.0}


@pytest.fixture(scope="module")
def models():
    """ltx-core's DiT, and ltx-jax's as the pipelines run it: jitted (`SequenceParallel` on one device)."""
    reference = torch_model(CFG)
    return reference, SequenceParallel(jax_model(CFG, reference), make_mesh(1))


@pytest.fixture(scope="module")
def contexts():
    rng = np.random.default_rng(1)
    video, audio = (CFG.cross_attention_dim, CFG.audio_cross_attention_dim)
    return {
        name: rng.standard_normal((1, 8, width)).astype(np.float32)
        for name, width in (("video", video), ("video_negative", video), ("audio", audio), ("audio_negative", audio))
    }


def noised_states(seed=0):
    video = patchifiers.initial_video_state(VideoLatentShape.from_pixel_shape(PIXELS, 16), PIXELS.fps)
    audio = patchifiers.initial_audio_state(AudioLatentShape.from_video_pixel_shape(PIXELS, 4, 4))
    keys = jax.random.split(jax.random.key(seed))
    return tuple(
        add_noise(jax.tree.map(np.asarray, s), jax.random.normal(k, s.latent.shape))
        for s, k in zip((video, audio), keys, strict=True)
    )


def to_torch(state):
    """1.0.0's `LatentState` (it has no `keyframes_mask` or `frozen`: these states mark nothing the tiny DiT,
    without the keyframe embedding, reads, and freeze nothing)."""
    fields = ("latent", "denoise_mask", "positions", "clean_latent", "attention_mask")
    return TorchLatentState(
        **{
            name: None if getattr(state, name) is None else torch.tensor(np.asarray(getattr(state, name)))
            for name in fields
        }
    )


def test_distilled_sigmas_equal_reference():
    assert schedulers.DISTILLED_SIGMA_VALUES == tuple(DISTILLED_SIGMA_VALUES)
    assert schedulers.STAGE_2_DISTILLED_SIGMA_VALUES == tuple(STAGE_2_DISTILLED_SIGMA_VALUES)


def test_guided_loop_equals_ltx_pipelines(models, contexts):
    """cfg + stg + modality isolation + rescale for both streams over 3 steps: all four passes batched
    into one forward here, run one by one by ltx-pipelines."""
    reference_model, model = models
    video, audio = noised_states()
    sigmas = schedulers.ltx2_sigmas(3)
    denoiser = GuidedDenoiser(
        model, contexts["video"], contexts["audio"], contexts["video_negative"], contexts["audio_negative"],
        MultiModalGuiderParams(**VIDEO_GUIDANCE), MultiModalGuiderParams(**AUDIO_GUIDANCE),
    )  # fmt: skip
    ours = euler_denoising_loop(sigmas, video, audio, denoiser, progress=False)
    reference_fn = multi_modal_guider_denoising_func(
        MultiModalGuider(TorchGuiderParams(**VIDEO_GUIDANCE), torch.from_numpy(contexts["video_negative"])),
        MultiModalGuider(TorchGuiderParams(**AUDIO_GUIDANCE), torch.from_numpy(contexts["audio_negative"])),
        torch.from_numpy(contexts["video"]),
        torch.from_numpy(contexts["audio"]),
        X0Model(reference_model),
    )
    with torch.no_grad():
        reference = reference_loop(
            torch.from_numpy(sigmas), to_torch(video), to_torch(audio), EulerDiffusionStep(), reference_fn
        )
    for name, ours_state, reference_state in zip(("video", "audio"), ours, reference, strict=True):
        error = relative_error(ours_state.latent, reference_state.latent)
        assert error <= FLOAT32, f"{name}: {error:.2e}"
        moved = relative_error(ours_state.latent, np.asarray((video, audio)[name == "audio"].latent))
        assert moved > 0.1, f"{name} barely changed ({moved:.2e}): the loop did not run"


def test_chunked_passes_and_skipped_steps_match(models, contexts):
    """max_batch_size splits the batched passes without changing the result; skip_step reuses x0."""
    _, model = models
    video, audio = noised_states()
    sigmas = schedulers.ltx2_sigmas(3)
    params = MultiModalGuiderParams(**VIDEO_GUIDANCE)
    args = (model, contexts["video"], contexts["audio"], contexts["video_negative"], contexts["audio_negative"])
    whole = euler_denoising_loop(sigmas, video, audio, GuidedDenoiser(*args, params, params), progress=False)
    chunked = euler_denoising_loop(
        sigmas, video, audio, GuidedDenoiser(*args, params, params, max_batch_size=3), progress=False
    )
    for a, b in zip(whole, chunked, strict=True):
        assert relative_error(b.latent, a.latent) <= FLOAT32
    calls = []

    def counting(*inputs):
        calls.append(1)
        return model(*inputs)

    skipping = dataclasses.replace(params, skip_step=1)
    denoiser = GuidedDenoiser(counting, *args[1:], skipping, skipping)
    euler_denoising_loop(sigmas, video, audio, denoiser, progress=False)
    assert len(calls) == 2  # steps 0 and 2 run the model; step 1 reuses step 0's x0


def test_a_fully_generated_stage_passes_one_timestep_per_sample(models, contexts):
    """Every token generated (text-to-video): the DiT gets each sample's sigma once, `(B, 1, 1)`, and the loop
    equals the per-token one, which a device-side mask (or any conditioned token) keeps."""
    _, model = models
    shapes = []

    def recording(video, audio, perturbations):
        shapes.append((video.timesteps.shape, audio.timesteps.shape))
        return model(video, audio, perturbations)

    params = MultiModalGuiderParams(**VIDEO_GUIDANCE)
    args = (
        contexts["video"],
        contexts["audio"],
        contexts["video_negative"],
        contexts["audio_negative"],
        params,
        params,
    )
    video, audio = noised_states()
    sigmas = schedulers.ltx2_sigmas(2)
    per_sample = euler_denoising_loop(sigmas, video, audio, GuidedDenoiser(recording, *args), progress=False)
    assert set(shapes) == {((4, 1, 1), (4, 1, 1))}  # 4 passes x batch 1, both steps
    on_device = [s.replace(denoise_mask=jnp.asarray(s.denoise_mask)) for s in (video, audio)]
    shapes.clear()
    per_token = euler_denoising_loop(sigmas, *on_device, GuidedDenoiser(recording, *args), progress=False)
    assert set(shapes) == {((4, video.latent.shape[1], 1), (4, audio.latent.shape[1], 1))}
    for ours, reference in zip(per_sample, per_token, strict=True):
        assert relative_error(ours.latent, reference.latent) <= FLOAT32
    conditioned = np.ones_like(video.denoise_mask)
    conditioned[:, 0] = 0.0
    assert every_token_generated(video.denoise_mask)
    assert not every_token_generated(conditioned)
