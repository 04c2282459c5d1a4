"""fp8-cast against ltx-core's own fp8-cast (`QuantizationPolicy.fp8_cast()`), on the tiny audio-video DiT.

Both sides cast the same weights to float8_e4m3fn with the reference's key rule and upcast them in the
matmuls. With float32 activations the upcast weights are exact (every fp8 value is a float32), so the
two forwards must agree within DESIGN.md's float32 bound, 1e-5: the quantization itself is identical.
Against the unquantized model the output moves by what fp8's 3-bit mantissa costs (measured and
bounded below), which is the quality question; docs/quantization.md has the production-width numbers.
"""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch
from checkpoint_files import fp8_scaled, official_state, write_checkpoint
from flax import nnx
from ltx_core_twin import default_inputs, jax_model, relative_error, run_jax, run_torch, torch_model
from tolerances import BF16, FLOAT32, FP8_MATMUL

import ltx_jax
from ltx_jax.convert import checkpoint
from ltx_jax.convert.state_dict import DIT_PREFIX, expected_keys
from ltx_jax.model.lora import LoraWeights, with_lora
from ltx_jax.model.quantization import (
    FP8,
    Fp8Linear,
    fp8_matmuls_upcast,
    fp8_targets,
    from_fp8,
    is_fp8_cast_key,
    quantize_fp8,
    quantize_fp8_cast,
    quantize_per_tensor,
)
from ltx_jax.parallel import make_mesh

with torch.no_grad():
    from ltx_core.quantization.fp8_cast import TRANSFORMER_LINEAR_DOWNCAST_MAP, UPCAST_DURING_INFERENCE

CFG = ltx_jax.LTXConfig.tiny(
    num_layers=2, apply_gated_attention=True, cross_attention_adaln=True, av_ca_scale_shift_from_sigma=True
)  # ltx-core 1.0.0's A/V AdaLN inputs
# fp8 e4m3 rounds each weight to 3 mantissa bits (relative step 2^-4): on this tiny random model the
# velocity moves by a few percent of its peak (measured 4.1e-2 video, 3.1e-2 audio): far beyond float32 noise,
# far below 1.
FP8_EFFECT = (1e-3, 0.15)


def torch_fp8_cast(model: torch.nn.Module) -> torch.nn.Module:
    """ltx-core's fp8-cast policy applied to a built model: its state-dict downcast, then its module op."""
    with torch.no_grad():
        for key, param in model.named_parameters():
            (result,) = TRANSFORMER_LINEAR_DOWNCAST_MAP.apply_to_key_value(key, param.data)
            param.data = result.new_value
    return UPCAST_DURING_INFERENCE.mutator(model)


def quantized_pair(seed: int = 0) -> tuple[torch.nn.Module, ltx_jax.LTXModel]:
    reference = torch_model(CFG, seed)
    ours = jax_model(CFG, reference)
    keys = [(key, entry[0]) for key, entry in expected_keys(ours).items()]
    return torch_fp8_cast(reference), quantize_fp8_cast(ours, keys, jnp.float32)


def spy_on_placed_dtypes(monkeypatch) -> dict:
    """Parameter path -> dtype of each value the loader hands to `set_params`: what the devices held once
    every tensor was placed, before the model was put together."""
    seen = {}
    set_params = checkpoint.set_params

    def spy(model, values):
        seen.update({path: value.dtype for path, value in values.items()})
        return set_params(model, values)

    monkeypatch.setattr(checkpoint, "set_params", spy)
    return seen


def load_sources(tmp_path, state: dict, source: str) -> tuple:
    """(path, loading options) of the tiny model's checkpoint as `source`: a file, a converted directory,
    or a file whose weights are split over ("sharded") or copied to ("replicated") 8 devices."""
    path = tmp_path / "model.safetensors"
    write_checkpoint(path, CFG, official_state(state, torch.bfloat16))
    if source == "converted":
        ltx_jax.convert_checkpoint(path, tmp_path / "converted", dtype="bfloat16", progress=False)
        path = tmp_path / "converted"
    mesh = make_mesh(8) if source in ("sharded", "replicated") else None
    return path, {"mesh": mesh, "shard_weights": source == "sharded"}


def test_fp8_cast_keys_are_the_references():
    reference = torch_model(CFG, 0)
    downcast = {
        key
        for key, param in reference.named_parameters()
        if TRANSFORMER_LINEAR_DOWNCAST_MAP.apply_to_key_value(key, param.data)[0].new_value.dtype == torch.float8_e4m3fn
    }
    ours = {key for key in expected_keys(jax_model(CFG, reference)) if is_fp8_cast_key(key)}
    assert ours == downcast
    # 2 blocks x (6 attentions x (q, k, v, out) + 2 feed-forwards x 2 linears) x (weight, bias)
    assert len(ours) == 2 * (6 * 4 + 2 * 2) * 2


def test_fp8_cast_forward_equals_ltx_core_fp8_cast():
    reference, ours = quantized_pair()
    kernel = ours.transformer_blocks[0].attn1.to_q.kernel.get_value()
    assert kernel.dtype == FP8
    video, audio = default_inputs(CFG)
    expected = run_torch(reference, video, audio)
    got = run_jax(ours, video, audio)
    for name, mine, theirs in zip(("video", "audio"), got, expected, strict=True):
        assert relative_error(mine, theirs) <= FLOAT32, name


def test_fp8_cast_moves_the_output_by_the_fp8_rounding_only():
    plain = jax_model(CFG, torch_model(CFG, 0))
    _, quantized = quantized_pair()
    video, audio = default_inputs(CFG)
    outputs = zip(run_jax(plain, video, audio), run_jax(quantized, video, audio), strict=True)
    for name, (base, fp8) in zip(("video", "audio"), outputs, strict=True):
        effect = relative_error(fp8, np.asarray(base))
        assert FP8_EFFECT[0] < effect < FP8_EFFECT[1], (name, effect)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float32])
def test_the_cast_rounds_to_nearest_like_torch(dtype):
    """Our cast (on the device) and torch's `.to(float8_e4m3fn)` give the same bytes, ties included."""
    values = np.concatenate([np.linspace(-448, 448, 20001), np.random.default_rng(0).standard_normal(5000) / 7])
    values = values.astype(ml_dtypes.bfloat16 if dtype == jnp.bfloat16 else np.float32)
    ours = np.asarray(jnp.asarray(values).astype(FP8)).view(np.uint8)
    source = torch.from_numpy(values.astype(np.float32)).to(torch.bfloat16 if dtype == jnp.bfloat16 else torch.float32)
    theirs = source.to(torch.float8_e4m3fn).view(torch.uint8).numpy()
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("source", ["safetensors", "converted", "sharded"])
def test_load_checkpoint_fp8_cast_equals_quantizing_in_memory(tmp_path, source, monkeypatch):
    """The loader casts each targeted tensor as it places it (a file, a converted directory, or weights
    split over 8 devices): the same fp8 parameters, dtypes and outputs as quantizing the whole model."""
    reference = torch_model(CFG, 0)
    state = {k: v.to(torch.bfloat16) for k, v in reference.state_dict().items()}
    path, options = load_sources(tmp_path, state, source)
    mesh = options["mesh"]
    placed = spy_on_placed_dtypes(monkeypatch)
    loaded, _ = ltx_jax.load_checkpoint(
        path, **options, dtype=jnp.bfloat16, attention_backend="xla", quantization="fp8-cast", progress=False
    )
    expected = jax_model(CFG, reference, jnp.bfloat16)
    ltx_jax.load_state_dict(expected, state)
    quantize_fp8_cast(expected, [(key, entry[0]) for key, entry in expected_keys(expected).items()], jnp.bfloat16)
    params = dict(nnx.to_flat_state(nnx.state(loaded, nnx.Param)))
    for path_, variable in nnx.to_flat_state(nnx.state(expected, nnx.Param)):
        got = np.asarray(params[path_].get_value())
        assert got.dtype == variable.get_value().dtype, path_
        assert placed[path_] == got.dtype, path_  # cast as placed, not once all were in bf16
        np.testing.assert_array_equal(got.view(np.uint8), np.asarray(variable.get_value()).view(np.uint8))
    assert loaded.transformer_blocks[1].ff.net[2].dtype == jnp.bfloat16
    got = run_jax(loaded, *default_inputs(CFG), dtype=jnp.bfloat16)
    for ours, theirs in zip(got, run_jax(expected, *default_inputs(CFG), dtype=jnp.bfloat16), strict=True):
        ours, theirs = np.asarray(ours, np.float32), np.asarray(theirs, np.float32)
        if mesh is None:
            np.testing.assert_array_equal(ours, theirs)
        else:  # the same weights; XLA partitions the bf16 matmuls over 8 devices, summing in another order
            assert relative_error(ours, theirs) <= BF16


def test_an_unknown_quantization_is_refused(tmp_path):
    with pytest.raises(ValueError, match="quantization must be one of \\['none', 'fp8-cast', 'fp8'\\], got 'int8'"):
        ltx_jax.load_checkpoint(tmp_path / "missing.safetensors", quantization="int8")


# fp8 matmuls (`quantization="fp8"`): no reference runs here (ltx-core's fp8_scaled_mm needs TensorRT-LLM),
# so each piece is checked against numpy's float8_e4m3fn (ml_dtypes) doing the same arithmetic.
def emulated_fp8_matmul(x: np.ndarray, kernel: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Scales max|.| / 448 per token of x and per tensor of the kernel, values rounded to e4m3, the
    dequantized values multiplied in float64."""

    def qdq(a: np.ndarray, axis: int | None) -> np.ndarray:
        scale = (np.abs(a).max(axis=axis, keepdims=axis is not None) / np.float32(448)).astype(np.float32)
        q = np.clip(a / scale, -448, 448).astype(ml_dtypes.float8_e4m3fn)
        return q.astype(np.float64) * scale.astype(np.float64)

    return (qdq(x, -1) @ qdq(kernel, None) + bias).astype(np.float32)


def test_fp8_linear_equals_the_emulated_fp8_matmul():
    rng = np.random.default_rng(0)
    linear = nnx.Linear(48, 40, rngs=nnx.Rngs(0))
    linear.bias.set_value(jnp.asarray(rng.standard_normal(40), jnp.float32))
    x = rng.standard_normal((2, 7, 48)).astype(np.float32) * 3
    fp8 = Fp8Linear.from_linear(linear)
    assert fp8.kernel.get_value().dtype == FP8
    expected = emulated_fp8_matmul(x, np.asarray(linear.kernel.get_value()), np.asarray(linear.bias.get_value()))
    np.testing.assert_allclose(np.asarray(fp8(jnp.asarray(x))), expected, rtol=FP8_MATMUL, atol=FP8_MATMUL)
    plain = np.asarray(linear(jnp.asarray(x)))
    assert 1e-3 < relative_error(np.asarray(fp8(jnp.asarray(x))), plain) < 0.1  # fp8 moved it, by a few percent
    # each token's scale is its own: a row does not change with what is batched beside it
    np.testing.assert_array_equal(np.asarray(fp8(jnp.asarray(x[:1]))), np.asarray(fp8(jnp.asarray(x)))[:1])


def test_quantizing_values_on_the_fp8_grid_is_exact():
    """A kernel whose entries are e4m3 values times 2^-3 (max 448 x 2^-3) quantizes with scale 2^-3 exactly."""
    grid = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    grid = grid[np.isfinite(grid)]
    kernel = np.resize(grid, (16, 15)) * np.float32(2**-3)
    kernel[0, 0] = 448 * 2**-3
    values, scale = quantize_per_tensor(jnp.asarray(kernel))
    assert float(scale) == 2**-3
    np.testing.assert_array_equal(np.asarray(from_fp8(values, scale, jnp.float32)), kernel)


@pytest.mark.parametrize(
    ("capability", "warned"), [("8.0", True), ("8.6", True), ("8.9", False), ("9.0", False), ("gfx90a", False)]
)
def test_quantize_fp8_warns_on_a_gpu_without_fp8_tensor_cores(monkeypatch, caplog, capability, warned):
    """An A100 (8.0) or an RTX 30 (8.6) multiplies fp8 only by upcasting: quantize_fp8 says so and names
    fp8-cast; Ada (8.9) and Hopper (9.0) do not warn, nor does the CPU (the tests' own runs) or a GPU whose
    capability is no CUDA version (ROCm's gfx90a)."""
    assert fp8_matmuls_upcast() is None  # on the CPU
    gpu = type("Gpu", (), {"device_kind": "Some GPU", "compute_capability": capability})()
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(jax, "local_devices", lambda: [gpu])
    with caplog.at_level("WARNING", logger="ltx_jax.model.quantization"):
        quantize_fp8(jax_model(CFG, torch_model(CFG, 0)))
    warnings = [r.getMessage() for r in caplog.records if "no fp8 tensor cores" in r.getMessage()]
    assert bool(warnings) == warned
    if warned:
        assert f"compute capability {capability}" in warnings[0]
        assert "fp8-cast" in warnings[0]


def test_fp8_quantizes_the_references_blocks_and_moves_the_output_by_fp8_rounding():
    """Blocks 0 and 43-47 stay (ltx-core's EXCLUDED_LAYER_SUBSTRINGS): of 2 blocks, block 1's linears turn fp8.
    Weights and inputs rounded to e4m3 move the velocity by a few percent (measured 2.7e-2 video, 2.2e-2
    audio): within fp8-cast's bounds."""
    plain = jax_model(CFG, torch_model(CFG, 0))
    quantized = quantize_fp8(jax_model(CFG, torch_model(CFG, 0)))
    kinds = [
        {type(m).__name__ for _, m in nnx.iter_modules(b) if "Linear" in type(m).__name__}
        for b in quantized.transformer_blocks
    ]
    assert kinds == [{"Linear"}, {"Fp8Linear"}]
    video, audio = default_inputs(CFG)
    outputs = zip(run_jax(plain, video, audio), run_jax(quantized, video, audio), strict=True)
    for name, (base, fp8) in zip(("video", "audio"), outputs, strict=True):
        effect = relative_error(fp8, np.asarray(base))
        assert FP8_EFFECT[0] < effect < FP8_EFFECT[1], (name, effect)


def test_a_lora_on_an_fp8_model_stays_fp8_and_applies():
    """`with_lora` dequantizes an fp8 kernel, fuses the LoRA in bf16 and quantizes again per block: the
    output follows the LoRA as the unquantized model's does, within fp8's rounding."""
    plain = jax_model(CFG, torch_model(CFG, 0))
    quantized = quantize_fp8(jax_model(CFG, torch_model(CFG, 0)))
    rng = np.random.default_rng(1)
    factors = {}
    for path in [
        ("transformer_blocks", 1, "attn1", "to_q", "kernel"),
        ("transformer_blocks", 1, "ff", "net", 2, "kernel"),
    ]:
        fan_in, fan_out = dict(nnx.to_flat_state(nnx.state(plain)))[path].get_value().shape
        factors[path] = (jnp.asarray(rng.standard_normal((4, fan_in)) * 0.3, jnp.float32),
                         jnp.asarray(rng.standard_normal((fan_out, 4)) * 0.3, jnp.float32))  # fmt: skip
    lora = LoraWeights(factors, strength=1.0)
    video, audio = default_inputs(CFG)
    base = run_jax(quantized, video, audio)[0]
    with_plain = run_jax(with_lora(plain, lora), video, audio)[0]
    with_fp8 = run_jax(with_lora(quantized, lora), video, audio)[0]
    assert relative_error(with_plain, np.asarray(run_jax(plain, video, audio)[0])) > 0.05  # the LoRA matters
    assert relative_error(with_fp8, np.asarray(with_plain)) < FP8_EFFECT[1]
    assert relative_error(with_fp8, np.asarray(base)) > 0.05


@pytest.mark.parametrize("source", ["safetensors", "converted", "sharded", "replicated"])
def test_load_checkpoint_fp8_equals_quantizing_in_memory(tmp_path, source, monkeypatch):
    """Each kernel quantized as it is placed (its maximum taken shard by shard) equals `quantize_fp8` on the
    whole bf16 model, bit for bit, scales included."""
    reference = torch_model(CFG, 0)
    state = {k: v.to(torch.bfloat16) for k, v in reference.state_dict().items()}
    path, options = load_sources(tmp_path, state, source)
    placed = spy_on_placed_dtypes(monkeypatch)
    loaded, _ = ltx_jax.load_checkpoint(
        path, **options, dtype=jnp.bfloat16, attention_backend="xla", quantization="fp8", progress=False
    )
    expected = jax_model(CFG, reference, jnp.bfloat16)
    ltx_jax.load_state_dict(expected, state)
    kernels = [target[0] for target in fp8_targets(expected)]
    quantize_fp8(expected)
    assert isinstance(loaded.transformer_blocks[1].attn1.to_q, Fp8Linear)
    assert kernels
    assert all(placed[kernel] == FP8 for kernel in kernels)  # quantized as placed
    got = dict(nnx.to_flat_state(nnx.state(loaded, nnx.Param)))
    for path_, variable in nnx.to_flat_state(nnx.state(expected, nnx.Param)):
        ours, theirs = (np.atleast_1d(np.asarray(v.get_value())) for v in (got[path_], variable))
        np.testing.assert_array_equal(ours.view(np.uint8), theirs.view(np.uint8))


def test_load_checkpoint_fp8_keeps_an_fp8_checkpoints_weights_as_stored(tmp_path):
    """An fp8 checkpoint's per-tensor scaled kernels load as stored (the bytes, transposed, and the scale),
    not dequantized to bf16 and quantized again; the kernels of the blocks that stay bf16 dequantize."""
    stored, dequantized = fp8_scaled(torch_model(CFG, 0).state_dict())
    path = tmp_path / "fp8.safetensors"
    write_checkpoint(path, CFG, {DIT_PREFIX + k: v for k, v in stored.items()})
    loaded, _ = ltx_jax.load_checkpoint(
        path, dtype=jnp.bfloat16, attention_backend="xla", quantization="fp8", progress=False
    )
    q = loaded.transformer_blocks[1].attn1.to_q
    file_values = stored["transformer_blocks.1.attn1.to_q.weight"].view(torch.uint8).numpy().T
    np.testing.assert_array_equal(np.asarray(q.kernel.get_value()).view(np.uint8), file_values)
    assert float(q.kernel_scale.get_value()) == float(stored["transformer_blocks.1.attn1.to_q.weight_scale"])
    for key, module in (("transformer_blocks.0.attn1.to_q", loaded.transformer_blocks[0].attn1.to_q),):
        expected = dequantized[f"{key}.weight"].to(torch.bfloat16).float().numpy().T
        np.testing.assert_array_equal(np.asarray(module.kernel.get_value(), np.float32), expected)
