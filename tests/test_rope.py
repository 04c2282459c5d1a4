"""RoPE tables and rotations against ltx_core.model.transformer.rope."""

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from ltx_core.model.transformer import rope as torch_rope
from ltx_core_twin import audio_positions, video_positions
from tolerances import ROPE_TABLE

from ltx_jax.model.rope import apply_rotary_emb, freq_grid, precompute_freqs_cis

THETA = 10000.0
TEST_WIDTHS = [(1, 32), (1, 64), (3, 64), (3, 128), (1, 128)]  # (axes, dim) of the tiny test models
PRODUCTION_WIDTHS = [(3, 4096), (1, 2048)]  # video self-attention, audio and A/V cross-attention
MAX_ULP_AT_PRODUCTION_WIDTHS = 2  # torch's vectorized float32 pow is not correctly rounded


def ulps(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64)).max())


@pytest.mark.parametrize(("axes", "dim"), TEST_WIDTHS + PRODUCTION_WIDTHS)
def test_float64_grid_is_exact(axes, dim):
    expected = torch_rope.generate_freq_grid_np(THETA, axes, dim).numpy()
    np.testing.assert_array_equal(freq_grid(THETA, axes, dim, True), expected)


@pytest.mark.parametrize(("axes", "dim"), TEST_WIDTHS)
def test_float32_grid_is_bit_exact_at_test_widths(axes, dim):
    expected = torch_rope.generate_freq_grid_pytorch(THETA, axes, dim).numpy()
    np.testing.assert_array_equal(freq_grid(THETA, axes, dim, False), expected)


@pytest.mark.parametrize(("axes", "dim"), PRODUCTION_WIDTHS)
def test_float32_grid_within_ulps_at_production_widths(axes, dim):
    expected = torch_rope.generate_freq_grid_pytorch(THETA, axes, dim).numpy()
    assert ulps(freq_grid(THETA, axes, dim, False), expected) <= MAX_ULP_AT_PRODUCTION_WIDTHS


@pytest.mark.parametrize("rope_type", ["split", "interleaved"])
@pytest.mark.parametrize(
    ("positions", "dim", "heads", "max_pos"),
    [
        (video_positions(2, 37), 64, 4, (20, 2048, 2048)),
        (audio_positions(2, 13), 32, 4, (20,)),
    ],
)
def test_tables_and_rotation_match(rope_type, positions, dim, heads, max_pos):
    kwargs = dict(dim=dim, theta=THETA, max_pos=list(max_pos), use_middle_indices_grid=True, num_attention_heads=heads)
    expected_cos, expected_sin = torch_rope.precompute_freqs_cis(
        torch.from_numpy(positions),
        out_dtype=torch.float32,
        rope_type=torch_rope.LTXRopeType(rope_type),
        freq_grid_generator=torch_rope.generate_freq_grid_np,
        **kwargs,
    )
    kwargs["max_pos"] = max_pos
    cos, sin = precompute_freqs_cis(
        jnp.asarray(positions), out_dtype=jnp.float32, rope_type=rope_type, double_precision=True, **kwargs
    )
    if rope_type == "split":  # ltx-core is head-major (B, H, T, d); ours is token-major (B, T, H, d)
        expected_cos, expected_sin = expected_cos.transpose(1, 2), expected_sin.transpose(1, 2)
    np.testing.assert_allclose(cos, expected_cos.numpy(), atol=ROPE_TABLE)
    np.testing.assert_allclose(sin, expected_sin.numpy(), atol=ROPE_TABLE)

    x = np.random.default_rng(0).standard_normal((2, positions.shape[2], dim)).astype(np.float32)
    torch_pe = (torch.from_numpy(np.asarray(cos)), torch.from_numpy(np.asarray(sin)))
    if rope_type == "split":
        torch_pe = tuple(t.transpose(1, 2) for t in torch_pe)
    expected = torch_rope.apply_rotary_emb(torch.from_numpy(x), torch_pe, torch_rope.LTXRopeType(rope_type))
    np.testing.assert_allclose(
        apply_rotary_emb(jnp.asarray(x), (cos, sin), rope_type), expected.numpy(), atol=ROPE_TABLE
    )
