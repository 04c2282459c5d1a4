"""load_state_dict: the ltx-core key table, prefixes, value types, and strict errors."""

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from ltx_core_twin import torch_model

import ltx_jax
from ltx_jax.convert.state_dict import DIT_PREFIX, param_variables, set_params, transpose
from ltx_jax.model.abstract import ShapeOnlyRngs

CFG = ltx_jax.LTXConfig.tiny(apply_gated_attention=True, cross_attention_adaln=True)


@pytest.fixture(scope="module")
def reference_state():
    return torch_model(CFG).state_dict()


def fresh_model() -> ltx_jax.LTXModel:
    return ltx_jax.LTXModel(CFG, rngs=nnx.Rngs(1))


@pytest.mark.parametrize("dtype", [jnp.bfloat16, np.float32, np.int8])
def test_the_host_transpose_moves_every_element_across_tile_edges(dtype):
    """Shapes that are not multiples of the 128 x 128 tiles, so edge tiles are partial."""
    matrix = np.arange(300 * 259).reshape(300, 259).astype(dtype)
    transposed = transpose(matrix)
    assert transposed.dtype == matrix.dtype
    assert transposed.flags.c_contiguous
    np.testing.assert_array_equal(transposed.view(np.uint8), np.ascontiguousarray(matrix.T).view(np.uint8))


def test_the_abstract_model_has_the_built_ones_parameters_each_its_own():
    """`LTXModel.abstract` traces one block and copies it; the copies must not share variables, or
    loading block 2's weights would overwrite block 1's."""
    cfg = ltx_jax.LTXConfig.tiny(num_layers=3, cross_attention_adaln=True)
    built = nnx.eval_shape(lambda: ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0), param_dtype=jnp.bfloat16))
    abstract = ltx_jax.LTXModel.abstract(cfg, jnp.bfloat16)

    def shapes(model: nnx.Module) -> dict:
        flat = nnx.to_flat_state(nnx.state(model, nnx.Param))
        return {p: (v.get_value().shape, v.get_value().dtype) for p, v in flat}

    assert shapes(abstract) == shapes(built)
    variables = param_variables(abstract)
    assert list(variables) == list(shapes(abstract))
    assert len({id(v) for v in variables.values()}) == len(variables)
    set_params(abstract, {p: np.full(v.get_value().shape, i, np.float32) for i, (p, v) in enumerate(variables.items())})
    for i, (_, variable) in enumerate(nnx.to_flat_state(nnx.state(abstract, nnx.Param))):
        assert float(variable.get_value().reshape(-1)[0]) == i


def test_shape_only_rngs_serve_only_the_params_stream():
    with pytest.raises(AttributeError, match="dropout"):
        ShapeOnlyRngs().dropout()


def test_keys_transposes_and_values(reference_state):
    model = ltx_jax.load_state_dict(fresh_model(), reference_state)
    block = model.transformer_blocks[1]
    np.testing.assert_array_equal(
        block.attn1.to_q.kernel[...], reference_state["transformer_blocks.1.attn1.to_q.weight"].numpy().T
    )
    np.testing.assert_array_equal(
        block.attn1.to_out[0].bias[...], reference_state["transformer_blocks.1.attn1.to_out.0.bias"].numpy()
    )
    np.testing.assert_array_equal(
        block.ff.net[2].kernel[...], reference_state["transformer_blocks.1.ff.net.2.weight"].numpy().T
    )
    np.testing.assert_array_equal(model.scale_shift_table[...], reference_state["scale_shift_table"].numpy())


def test_checkpoint_prefix_and_numpy_values(reference_state):
    prefixed = {DIT_PREFIX + k: v.numpy() for k, v in reference_state.items()}
    model = ltx_jax.load_state_dict(fresh_model(), prefixed)
    expected = reference_state["audio_adaln_single.linear.weight"].numpy().T
    np.testing.assert_array_equal(model.audio_adaln_single.linear.kernel[...], expected)


def test_bfloat16_tensors_load_bit_exact(reference_state):
    bf16 = {k: v.to(torch.bfloat16) for k, v in reference_state.items()}
    model = ltx_jax.LTXModel(CFG, rngs=nnx.Rngs(1), param_dtype=jnp.bfloat16)
    ltx_jax.load_state_dict(model, bf16)
    ours = np.asarray(model.patchify_proj.kernel[...]).view(np.uint16)
    theirs = bf16["patchify_proj.weight"].T.contiguous().view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(ours, theirs)


def test_missing_key_is_named(reference_state):
    state = dict(reference_state)
    del state["transformer_blocks.0.attn2.k_norm.weight"]
    with pytest.raises(ValueError, match=r"1 missing keys: transformer_blocks\.0\.attn2\.k_norm\.weight"):
        ltx_jax.load_state_dict(fresh_model(), state)


def test_unexpected_key_is_named(reference_state):
    state = dict(reference_state, **{"video_embeddings_connector.learnable_registers": torch.zeros(4, 4)})
    with pytest.raises(ValueError, match=r"1 unexpected keys: video_embeddings_connector\.learnable_registers"):
        ltx_jax.load_state_dict(fresh_model(), state)


def test_wrong_shape_is_named_and_model_untouched(reference_state):
    state = dict(reference_state, **{"proj_out.weight": torch.zeros(3, 3)})
    model = fresh_model()
    before = np.asarray(model.proj_out.kernel[...]).copy()
    with pytest.raises(
        ValueError, match=r"wrong shapes: proj_out\.weight: checkpoint \(3, 3\), model expects \(16, 64\)"
    ):
        ltx_jax.load_state_dict(model, state)
    np.testing.assert_array_equal(model.proj_out.kernel[...], before)


def test_config_mismatch_lists_every_problem(reference_state):
    ungated = ltx_jax.LTXModel(ltx_jax.LTXConfig.tiny(cross_attention_adaln=True), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"unexpected keys: .*to_gate_logits.* and \d+ more"):
        ltx_jax.load_state_dict(ungated, reference_state)
