"""LTXModel against ltx-core 1.0.0's LTXModel with the same weights and inputs (CPU)."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from ltx_core.utils import to_denoised as torch_to_denoised
from ltx_core_twin import (
    Inputs,
    default_inputs,
    jax_model,
    relative_error,
    run_jax,
    run_torch,
    torch_model,
)
from tolerances import BF16, FLOAT32

import ltx_jax
from ltx_jax import BatchedPerturbationConfig, Perturbation, PerturbationConfig, PerturbationType

BRANCH_EFFECT = 1e-3  # a branch that matters moves the output by far more than the tolerance

# ltx-core 1.0.0 feeds the other modality's sigma to the A/V cross-attention scale/shift AdaLN;
# upstream (our default) feeds per-token timesteps. Parity runs reproduce 1.0.0.
LEGACY = {"av_ca_scale_shift_from_sigma": True}

ARCHITECTURES = {
    "av": {},
    "video_only": {"model_type": "video"},
    "audio_only": {"model_type": "audio"},
    "interleaved_rope": {"rope_type": "interleaved"},
    "float64_freq_grid": {"double_precision_rope": True},
    "start_positions_only": {"use_middle_indices_grid": False},
    "gated_attention": {"apply_gated_attention": True},
    "cross_attention_adaln": {"cross_attention_adaln": True},
    "caption_projection_19b": {"caption_channels": 24},
    "ltx2_3_like": {"apply_gated_attention": True, "cross_attention_adaln": True, "double_precision_rope": True},
}


def assert_parity(ours: tuple, reference: tuple, tolerance: float = FLOAT32) -> None:
    for name, o, r in zip(("video", "audio"), ours, reference, strict=True):
        assert (o is None) == (r is None), name
        if r is not None:
            assert o.shape == tuple(r.shape), name
            assert relative_error(o, r) <= tolerance, f"{name}: relative error {relative_error(o, r):.2e}"


def compare(cfg: ltx_jax.LTXConfig, video: Inputs | None, audio: Inputs | None, perturbations=None) -> None:
    reference = torch_model(cfg)
    assert_parity(
        run_jax(jax_model(cfg, reference), video, audio, perturbations),
        run_torch(reference, video, audio, perturbations),
    )


@pytest.mark.parametrize("overrides", ARCHITECTURES.values(), ids=ARCHITECTURES.keys())
def test_architecture_parity(overrides):
    cfg = ltx_jax.LTXConfig.tiny(**LEGACY, **overrides)
    compare(cfg, *default_inputs(cfg, batch=2))


def test_self_attention_mask_with_zeros():
    cfg = ltx_jax.LTXConfig.tiny(**LEGACY)
    video, audio = default_inputs(cfg, batch=2)
    rng = np.random.default_rng(1)

    def mask(tokens: int) -> np.ndarray:
        m = rng.choice(np.array([0.0, 0.3, 1.0, 1.0], np.float32), size=(2, tokens, tokens))
        m[1, :, :5] = 0.0  # whole key columns masked
        m[0, 3, :] = 0.0  # a fully masked query row stays finite
        return m

    compare(
        cfg,
        dataclasses.replace(video, attention_mask=mask(video.latent.shape[1])),
        dataclasses.replace(audio, attention_mask=mask(audio.latent.shape[1])),
    )


@pytest.mark.parametrize("overrides", [{}, {"cross_attention_adaln": True}], ids=["plain", "cross_attention_adaln"])
def test_context_mask(overrides):
    cfg = ltx_jax.LTXConfig.tiny(**LEGACY, **overrides)
    video, audio = default_inputs(cfg, batch=2)
    context_mask = np.ones((2, video.context.shape[1]), np.int64)
    context_mask[0, -3:] = 0
    context_mask[1, :2] = 0
    compare(
        cfg,
        dataclasses.replace(video, context_mask=context_mask),
        dataclasses.replace(audio, context_mask=context_mask),
    )


def test_boolean_context_mask_equals_integer_mask():
    """ltx-core takes integer masks only; a boolean mask means the same here."""
    cfg = ltx_jax.LTXConfig.tiny(model_type="video")
    model = ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0))
    video, _ = default_inputs(cfg)
    context_mask = np.arange(video.context.shape[1])[None] < 4
    as_int = run_jax(model, dataclasses.replace(video, context_mask=context_mask.astype(np.int32)), None)
    as_bool = run_jax(model, dataclasses.replace(video, context_mask=context_mask), None)
    np.testing.assert_array_equal(as_int[0], as_bool[0])


def test_perturbations():
    cfg = ltx_jax.LTXConfig.tiny(**LEGACY, num_layers=3)
    perturbations = BatchedPerturbationConfig(
        (
            PerturbationConfig(
                (
                    Perturbation(PerturbationType.SKIP_VIDEO_SELF_ATTN, (1,)),  # one block, one sample: blend
                    Perturbation(PerturbationType.SKIP_AUDIO_SELF_ATTN, (0,)),
                    Perturbation(PerturbationType.SKIP_V2A_CROSS_ATTN, (2,)),
                )
            ),
            PerturbationConfig(
                (
                    Perturbation(PerturbationType.SKIP_AUDIO_SELF_ATTN, (0,)),  # whole batch: attention skipped
                    Perturbation(PerturbationType.SKIP_A2V_CROSS_ATTN, None),
                    Perturbation(PerturbationType.SKIP_V2A_CROSS_ATTN, (2,)),
                )
            ),
        )
    )
    compare(cfg, *default_inputs(cfg, batch=2), perturbations)


def test_disabled_video_stream():
    cfg = ltx_jax.LTXConfig.tiny(**LEGACY)
    video, audio = default_inputs(cfg)
    compare(cfg, dataclasses.replace(video, enabled=False), audio)


def test_bfloat16_within_tolerance_of_float32_reference():
    cfg = ltx_jax.LTXConfig.tiny(**LEGACY, **ARCHITECTURES["ltx2_3_like"])
    video, audio = default_inputs(cfg, batch=2)
    reference = torch_model(cfg)
    ours = run_jax(jax_model(cfg, reference, jnp.bfloat16), video, audio, dtype=jnp.bfloat16)
    assert all(o.dtype == jnp.bfloat16 for o in ours)
    assert_parity(ours, run_torch(reference, video, audio), BF16)


def test_compiled_with_dit_compiler_options():
    """The forward as SequenceParallel and the benchmarks compile it. The options are XLA
    debug-option names, checked at compile time: one this jax's XLA does not know raises."""
    cfg = ltx_jax.LTXConfig.tiny(**LEGACY, **ARCHITECTURES["ltx2_3_like"])
    video, audio = default_inputs(cfg, batch=2)
    reference = torch_model(cfg)
    graphdef, state = nnx.split(jax_model(cfg, reference))
    forward = jax.jit(
        lambda state, v, a: nnx.merge(graphdef, state)(v, a), compiler_options=ltx_jax.DIT_COMPILER_OPTIONS
    )
    ours = forward(state, video.to_jax(jnp.float32), audio.to_jax(jnp.float32))
    assert_parity(ours, run_torch(reference, video, audio))


def test_upstream_av_adaln_uses_own_timesteps():
    """Upstream modulates A/V cross-attention with each stream's own per-token timesteps. When those
    equal the other stream's sigma, 1.0.0's inputs coincide, so 1.0.0 is the reference there."""
    cfg = ltx_jax.LTXConfig.tiny()
    video, audio = default_inputs(cfg, batch=2)
    v_tokens, a_tokens = video.latent.shape[1], audio.latent.shape[1]
    video_same = dataclasses.replace(video, timesteps=np.repeat(audio.sigma[:, None, None], v_tokens, axis=1))
    audio_same = dataclasses.replace(audio, timesteps=np.repeat(video.sigma[:, None, None], a_tokens, axis=1))
    compare(cfg, video_same, audio_same)

    reference = torch_model(cfg)
    upstream = run_jax(jax_model(cfg, reference), video, audio)
    legacy = run_jax(jax_model(dataclasses.replace(cfg, **LEGACY), reference), video, audio)
    assert relative_error(upstream[0], np.asarray(legacy[0])) > BRANCH_EFFECT


def test_ff_without_bias():
    """ff_bias=False (2.5): the reference with zero feed-forward biases, loaded without those keys."""
    cfg = ltx_jax.LTXConfig.tiny(**LEGACY, ff_bias=False)
    reference = torch_model(cfg)
    with torch.no_grad():
        for name, param in reference.named_parameters():
            if ".ff.net." in name and name.endswith("bias"):
                param.zero_()
    state = {k: v for k, v in reference.state_dict().items() if not (".ff.net." in k and k.endswith("bias"))}
    model = ltx_jax.load_state_dict(ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0), attention_backend="xla"), state)
    video, audio = default_inputs(cfg)
    assert_parity(run_jax(model, video, audio), run_torch(reference, video, audio))


def test_cross_attention_adaln_without_prompt_adaln():
    """use_prompt_adaln_single=False: the K/V modulation is the static table alone, which is the
    reference with a zeroed prompt AdaLN output layer."""
    cfg = ltx_jax.LTXConfig.tiny(**LEGACY, cross_attention_adaln=True, use_prompt_adaln_single=False)
    reference = torch_model(cfg)
    with torch.no_grad():
        for module in (reference.prompt_adaln_single, reference.audio_prompt_adaln_single):
            module.linear.weight.zero_()
            module.linear.bias.zero_()
    state = {k: v for k, v in reference.state_dict().items() if "prompt_adaln_single" not in k}
    model = ltx_jax.load_state_dict(ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0), attention_backend="xla"), state)
    video, audio = default_inputs(cfg)
    assert_parity(run_jax(model, video, audio), run_torch(reference, video, audio))


def test_keyframe_embedding_marks_tokens():
    """Marking every token adds the embedding to every projected token, which is the reference with
    the embedding folded into patchify_proj's bias; marking none changes nothing."""
    cfg = ltx_jax.LTXConfig.tiny(**LEGACY, model_type="video", use_keyframes_abs_pos_embedding=True)
    reference = torch_model(cfg)
    embedding = np.random.default_rng(3).standard_normal((1, cfg.inner_dim)).astype(np.float32)
    state = dict(reference.state_dict(), keyframes_abs_pos_embedding=embedding)
    model = ltx_jax.load_state_dict(ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0), attention_backend="xla"), state)
    video, _ = default_inputs(cfg)
    tokens = video.latent.shape[1]
    unmarked = run_jax(model, dataclasses.replace(video, keyframes_mask=np.zeros((1, tokens, 1), np.float32)), None)
    assert_parity(unmarked, run_torch(reference, video, None))
    with torch.no_grad():
        reference.patchify_proj.bias += torch.from_numpy(embedding[0])
    marked = run_jax(model, dataclasses.replace(video, keyframes_mask=np.ones((1, tokens, 1), np.float32)), None)
    assert_parity(marked, run_torch(reference, video, None))


@pytest.mark.parametrize(
    "skip",
    [
        PerturbationType.SKIP_VIDEO_SELF_ATTN,
        PerturbationType.SKIP_AUDIO_SELF_ATTN,
        PerturbationType.SKIP_A2V_CROSS_ATTN,
        PerturbationType.SKIP_V2A_CROSS_ATTN,
    ],
)
def test_each_attention_branch_moves_the_output(skip):
    """The test weights make every attention branch count, so the parity tests can fail."""
    cfg = ltx_jax.LTXConfig.tiny(**LEGACY)
    model = jax_model(cfg, torch_model(cfg))
    video, audio = default_inputs(cfg)
    skipped = BatchedPerturbationConfig((PerturbationConfig((Perturbation(skip, None),)),))
    base, changed = run_jax(model, video, audio), run_jax(model, video, audio, skipped)
    index = 0 if skip in (PerturbationType.SKIP_VIDEO_SELF_ATTN, PerturbationType.SKIP_A2V_CROSS_ATTN) else 1
    assert relative_error(changed[index], np.asarray(base[index])) > BRANCH_EFFECT


def test_to_denoised_matches_reference():
    rng = np.random.default_rng(0)
    latent = rng.standard_normal((2, 9, 4)).astype(np.float32)
    velocity = rng.standard_normal((2, 9, 4)).astype(np.float32)
    timesteps = rng.uniform(0, 1, (2, 9, 1)).astype(np.float32)
    expected = torch_to_denoised(*(torch.from_numpy(a) for a in (latent, velocity, timesteps)))
    np.testing.assert_array_equal(ltx_jax.to_denoised(latent, velocity, timesteps), expected.numpy())
    bf16 = ltx_jax.to_denoised(jnp.asarray(latent, jnp.bfloat16), velocity, timesteps)
    assert bf16.dtype == jnp.bfloat16
