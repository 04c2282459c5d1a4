"""Static fp8 input scales: an fp8 checkpoint's `input_scale` (ltx-core's fp8_scaled_mm) and
`calibrate_input_scales`, checked against numpy's float8_e4m3fn (ml_dtypes) and against the input
maxima recorded independently of the code under test."""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch
from checkpoint_files import fp8_scaled, write_checkpoint
from flax import nnx
from ltx_core_twin import default_inputs, jax_model, relative_error, run_jax, torch_model
from safetensors.torch import save_file
from tolerances import FLOAT32, FP8_MATMUL, SP

import ltx_jax
from ltx_jax.convert.dit_tensors import Lora
from ltx_jax.convert.state_dict import DIT_PREFIX
from ltx_jax.model.quantization import Fp8Linear, calibrate_input_scales, fp8_targets, quantize_fp8
from ltx_jax.parallel import SequenceParallel, make_mesh

CFG = ltx_jax.LTXConfig.tiny(
    num_layers=2, apply_gated_attention=True, cross_attention_adaln=True, av_ca_scale_shift_from_sigma=True
)
FP8_EFFECT = (1e-3, 0.15)  # as tests/test_quantization.py: fp8's rounding moves the tiny model's output


def test_a_static_input_scale_quantizes_every_token_by_it():
    """x / input_scale clipped to 448 and rounded to e4m3, times the e4m3 kernel, times both scales (float32):
    the arithmetic of ltx-core's FP8Linear, with inputs beyond 448 x input_scale clipped."""
    rng = np.random.default_rng(0)
    kernel = rng.standard_normal((48, 40)).astype(np.float32)
    bias = rng.standard_normal(40).astype(np.float32)
    x = rng.standard_normal((2, 7, 48)).astype(np.float32) * 3
    input_scale = np.float32(np.abs(x).max() / 448 * 0.5)  # half the range: the largest inputs clip
    kernel_scale = np.float32(np.abs(kernel).max() / 448)
    kernel_fp8 = (kernel / kernel_scale).astype(ml_dtypes.float8_e4m3fn)
    linear = Fp8Linear(jnp.asarray(kernel_fp8), jnp.asarray(kernel_scale), jnp.asarray(bias), jnp.asarray(input_scale))
    x_fp8 = np.clip(x / input_scale, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    assert np.abs(x / input_scale).max() > 448
    expected = (
        x_fp8.astype(np.float64) @ kernel_fp8.astype(np.float64) * (np.float64(input_scale) * np.float64(kernel_scale))
        + bias
    )
    np.testing.assert_allclose(np.asarray(linear(jnp.asarray(x))), expected, rtol=FP8_MATMUL, atol=FP8_MATMUL)
    # bf16 activations, as the DiT runs: the GEMM returns bf16 and the scales are applied after, so the output
    # is rounded twice (to bf16 and again), within two bf16 steps (2^-7 relative) of the exact product
    x_bf16 = x.astype(ml_dtypes.bfloat16)
    x_fp8 = np.clip(x_bf16.astype(np.float32) / input_scale, -448, 448).astype(ml_dtypes.float8_e4m3fn)
    exact = x_fp8.astype(np.float64) @ kernel_fp8.astype(np.float64) * (np.float64(input_scale) * kernel_scale)
    ours = np.asarray(linear(jnp.asarray(x_bf16)), np.float64) - bias.astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_allclose(ours, exact, rtol=2**-7, atol=2**-7 * np.abs(exact).max())


def quantized_model() -> ltx_jax.LTXModel:
    model = jax_model(CFG, torch_model(CFG, 0))
    quantize_fp8(model)
    return model


def fp8_linears(model: ltx_jax.LTXModel) -> dict[tuple, Fp8Linear]:
    return {(*path, "kernel"): m for path, m in nnx.iter_modules(model) if isinstance(m, Fp8Linear)}


@pytest.fixture(scope="module")
def eager_maxima() -> dict[tuple, float]:
    """max |x| each Fp8Linear (by its kernel's path) is called with in one eager forward of `quantized_model()`,
    recorded by a wrapper of the test's own (once: an eager forward compiles op by op)."""
    model, (video, audio) = quantized_model(), default_inputs(CFG)
    seen: dict[int, float] = {}
    call = Fp8Linear.__call__

    def recording(self: Fp8Linear, x: jnp.ndarray) -> jnp.ndarray:
        seen[id(self)] = max(seen.get(id(self), 0.0), float(jnp.max(jnp.abs(x))))
        return call(self, x)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Fp8Linear, "__call__", recording)
        model(video.to_jax(jnp.float32), audio.to_jax(jnp.float32), None)
    linears = fp8_linears(model)
    assert len(seen) == len(linears)  # the forward reaches every fp8 linear
    return {path: seen[id(linear)] for path, linear in linears.items()}


@pytest.mark.parametrize("jitted", [False, True])
def test_calibration_sets_each_linears_largest_input_over_448(eager_maxima, jitted):
    model = jax_model(CFG, torch_model(CFG, 0))
    targets = [target[0] for target in fp8_targets(model)]
    quantize_fp8(model)
    video, audio = default_inputs(CFG)
    linears = fp8_linears(model)
    assert sorted(linears) == sorted(targets) == sorted(eager_maxima)

    if jitted:  # nnx.jit carries the recorded maxima back
        scales = calibrate_input_scales(model, lambda m: run_jax(m, video, audio))
    else:
        scales = calibrate_input_scales(model, lambda m: m(video.to_jax(jnp.float32), audio.to_jax(jnp.float32), None))
    assert sorted(scales) == sorted(linears)
    for path, linear in linears.items():
        expected = np.float32(eager_maxima[path]) / np.float32(448)
        # eagerly the same ops give the same maxima; jitted, XLA's fused float32 arithmetic moves them within
        # DESIGN.md's float32 bound (measured 2.9e-7)
        np.testing.assert_allclose(scales[path], expected, rtol=FLOAT32 if jitted else 0)
        assert float(linear.input_scale.get_value()) == scales[path]
        assert linear.input_amax is None
    # the self-attention's q, k, v and gate logits read one x: equal scales, held as one parameter
    attn1 = model.transformer_blocks[1].attn1
    assert (
        attn1.to_q.input_scale is attn1.to_k.input_scale is attn1.to_v.input_scale is attn1.to_gate_logits.input_scale
    )
    assert attn1.to_out[0].input_scale is not attn1.to_q.input_scale


def test_a_calibrated_model_stays_within_fp8_rounding_of_bf16():
    """Calibrated on other noise than it then runs. One scale per tensor is coarser than one per token for the
    tiny model's uneven tokens: measured 4.9e-2 / 3.4e-2 (video / audio) from bf16, against per-token scales'
    2.8e-2 / 2.5e-2; bounded at 2.5x the per-token error."""
    plain = jax_model(CFG, torch_model(CFG, 0))
    dynamic = quantize_fp8(jax_model(CFG, torch_model(CFG, 0)))
    static = quantize_fp8(jax_model(CFG, torch_model(CFG, 0)))
    calibration = default_inputs(CFG, seed=1)
    calibrate_input_scales(static, lambda m: run_jax(m, *calibration))
    video, audio = default_inputs(CFG)
    outputs = (run_jax(m, video, audio) for m in (plain, dynamic, static))
    for base, per_token, fp8 in zip(*outputs, strict=True):
        error = relative_error(np.asarray(fp8), np.asarray(base))
        assert FP8_EFFECT[0] < error < 2.5 * relative_error(np.asarray(per_token), np.asarray(base))


def test_a_failed_calibration_keeps_the_scales_the_model_had():
    model = quantize_fp8(jax_model(CFG, torch_model(CFG, 0)))
    video, audio = default_inputs(CFG)
    calibrate_input_scales(model, lambda m: run_jax(m, video, audio))
    before = {path: m.input_scale for path, m in nnx.iter_modules(model) if isinstance(m, Fp8Linear)}

    def fails(m: ltx_jax.LTXModel) -> None:
        run_jax(m, video, audio)
        raise RuntimeError("interrupted")

    with pytest.raises(RuntimeError, match="interrupted"):
        calibrate_input_scales(model, fails)
    graphdef, state = nnx.split(model)
    copy_run = jax.jit(lambda s, v, a: nnx.merge(graphdef, s)(v, a))  # a copy: its maxima never come back
    with pytest.raises(ValueError, match="ran a copy of the model"):
        calibrate_input_scales(model, lambda m: copy_run(state, video.to_jax(), audio.to_jax()))
    after = {path: m for path, m in nnx.iter_modules(model) if isinstance(m, Fp8Linear)}
    assert all(after[path].input_scale is scale and after[path].input_amax is None for path, scale in before.items())


def test_calibrating_a_model_without_fp8_linears_is_refused():
    with pytest.raises(ValueError, match="run quantize_fp8\\(model\\) first"):
        calibrate_input_scales(jax_model(CFG, torch_model(CFG, 0)), lambda m: None)


@pytest.mark.parametrize("input_scales", [True, False])
def test_an_fp8_checkpoints_input_scales_load_as_stored(tmp_path, input_scales):
    """`input_scale` beside an fp8 weight becomes its Fp8Linear's static scale, bit for bit, also where a LoRA
    fused at load makes the kernel quantize again (ltx-core keeps it too); without one the linear quantizes its
    inputs per token. A self-attention's q, k, v and gate logits whose stored scales are equal share one."""
    stored, _ = fp8_scaled(torch_model(CFG, 0).state_dict(), input_scales=input_scales)
    attn1 = "transformer_blocks.1.attn1"
    if input_scales:
        for member in ("to_q", "to_k", "to_v", "to_gate_logits"):
            stored[f"{attn1}.{member}.input_scale"] = torch.tensor(0.02)
    path, lora = tmp_path / "fp8.safetensors", tmp_path / "lora.safetensors"
    write_checkpoint(path, CFG, {DIT_PREFIX + k: v for k, v in stored.items()})
    save_file(
        {
            f"diffusion_model.{attn1}.to_out.0.lora_A.weight": torch.randn(2, CFG.inner_dim).bfloat16(),
            f"diffusion_model.{attn1}.to_out.0.lora_B.weight": torch.randn(CFG.inner_dim, 2).bfloat16(),
        },
        str(lora),
    )
    loaded, _ = ltx_jax.load_checkpoint(
        path, dtype=jnp.bfloat16, attention_backend="xla", quantization="fp8", progress=False, loras=(Lora(str(lora)),)
    )
    linears = {path: m for path, m in nnx.iter_modules(loaded) if isinstance(m, Fp8Linear)}
    block_1_scales = [key for key in stored if key.startswith("transformer_blocks.1.") and key.endswith("weight_scale")]
    assert len(linears) == len(block_1_scales)
    for path, linear in linears.items():
        key = ".".join(str(p) for p in path) + ".input_scale"
        if input_scales:
            assert np.float32(linear.input_scale.get_value()) == stored[key].numpy(), key
        else:
            assert linear.input_scale is None
    block = loaded.transformer_blocks[1].attn1
    if input_scales:
        shared = block.to_q.input_scale
        assert all(m.input_scale is shared for m in (block.to_k, block.to_v, block.to_gate_logits))
        assert block.to_out[0].input_scale is not shared


def test_sequence_parallel_runs_static_scales_as_one_device_does():
    """A static scale does not depend on how the tokens are split: under Ulysses over 2 devices the calibrated
    model (its shared scale parameters included) gives one device's output within DESIGN.md's float32 bound
    (measured 4.0e-7 video, 3.1e-7 audio)."""
    model = quantize_fp8(jax_model(CFG, torch_model(CFG, 0)))
    calibrate_input_scales(model, lambda m: run_jax(m, *default_inputs(CFG, seed=1)))
    video, audio = default_inputs(CFG, batch=2, video_tokens=48)
    video, audio = video.to_jax(), audio.to_jax()
    ours = SequenceParallel(model, make_mesh(2))(video, audio)
    single = jax.jit(lambda v, a: model(v, a))(video, audio)
    for o, r in zip(ours, single, strict=True):
        assert relative_error(np.asarray(o), np.asarray(r)) < SP
