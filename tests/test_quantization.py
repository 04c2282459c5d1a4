"""fp8-cast against ltx-core's own fp8-cast (`QuantizationPolicy.fp8_cast()`), on the tiny audio-video DiT.

Both sides cast the same weights to float8_e4m3fn with the reference's key rule and upcast them in the
matmuls. With float32 activations the upcast weights are exact (every fp8 value is a float32), so the
two forwards must agree within DESIGN.md's float32 bound, 1e-5: the quantization itself is identical.
Against the unquantized model the output moves by what fp8's 3-bit mantissa costs (measured and
bounded below), which is the quality question; docs/quantization.md has the production-width numbers.
"""

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch
from checkpoint_files import official_state, write_checkpoint
from flax import nnx
from ltx_core_twin import default_inputs, jax_model, relative_error, run_jax, run_torch, torch_model

import ltx_jax
from ltx_jax.convert.state_dict import expected_keys
from ltx_jax.model.quantization import FP8, is_fp8_cast_key, quantize_fp8_cast
from ltx_jax.parallel import make_mesh

with torch.no_grad():
    from ltx_core.quantization.fp8_cast import TRANSFORMER_LINEAR_DOWNCAST_MAP, UPCAST_DURING_INFERENCE

CFG = ltx_jax.LTXConfig.tiny(
    num_layers=2, apply_gated_attention=True, cross_attention_adaln=True, av_ca_scale_shift_from_sigma=True
)  # ltx-core 1.0.0's A/V AdaLN inputs
TOLERANCE = 1e-5
BF16_TOLERANCE = 2e-2  # DESIGN.md's bf16 bound
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
        assert relative_error(mine, theirs) <= TOLERANCE, name


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
def test_load_checkpoint_fp8_cast_equals_quantizing_in_memory(tmp_path, source):
    """The loader casts each targeted tensor as it places it (a file, a converted directory, or weights
    split over 8 devices): the same fp8 parameters, dtypes and outputs as quantizing the whole model."""
    reference = torch_model(CFG, 0)
    state = {k: v.to(torch.bfloat16) for k, v in reference.state_dict().items()}
    path = tmp_path / "model.safetensors"
    write_checkpoint(path, CFG, official_state(state, torch.bfloat16))
    if source == "converted":
        ltx_jax.convert_checkpoint(path, tmp_path / "converted", dtype="bfloat16", progress=False)
        path = tmp_path / "converted"
    mesh = make_mesh(8) if source == "sharded" else None
    loaded, _ = ltx_jax.load_checkpoint(
        path, mesh=mesh, shard_weights=mesh is not None, dtype=jnp.bfloat16, attention_backend="xla",
        quantization="fp8-cast", progress=False,
    )  # fmt: skip
    expected = jax_model(CFG, reference, jnp.bfloat16)
    ltx_jax.load_state_dict(expected, state)
    quantize_fp8_cast(expected, [(key, entry[0]) for key, entry in expected_keys(expected).items()], jnp.bfloat16)
    params = dict(nnx.to_flat_state(nnx.state(loaded, nnx.Param)))
    for path_, variable in nnx.to_flat_state(nnx.state(expected, nnx.Param)):
        got = np.asarray(params[path_].get_value())
        assert got.dtype == variable.get_value().dtype, path_
        np.testing.assert_array_equal(got.view(np.uint8), np.asarray(variable.get_value()).view(np.uint8))
    assert loaded.transformer_blocks[1].ff.net[2].dtype == jnp.bfloat16
    got = run_jax(loaded, *default_inputs(CFG), dtype=jnp.bfloat16)
    for ours, theirs in zip(got, run_jax(expected, *default_inputs(CFG), dtype=jnp.bfloat16), strict=True):
        ours, theirs = np.asarray(ours, np.float32), np.asarray(theirs, np.float32)
        if mesh is None:
            np.testing.assert_array_equal(ours, theirs)
        else:  # the same weights; XLA partitions the bf16 matmuls over 8 devices, summing in another order
            assert relative_error(ours, theirs) <= BF16_TOLERANCE


def test_an_unknown_quantization_is_refused(tmp_path):
    with pytest.raises(ValueError, match="quantization must be one of \\['none', 'fp8-cast'\\], got 'fp8'"):
        ltx_jax.load_checkpoint(tmp_path / "missing.safetensors", quantization="fp8")
