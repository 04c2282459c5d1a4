"""LatentUpsampler and upsample_video against ltx-core 1.0.0's with the same random weights (CPU)."""

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from ltx_core.model.upsampler import LatentUpsampler as TorchLatentUpsampler
from ltx_core.model.upsampler import LatentUpsamplerConfigurator as TorchConfigurator
from ltx_core.model.upsampler import upsample_video as torch_upsample_video
from ltx_core.model.video_vae.ops import PerChannelStatistics
from ltx_core_twin import relative_error
from tolerances import FLOAT32

import ltx_jax
from ltx_jax.model.upsampler import LatentUpsampler, LatentUpsamplerConfigurator, upsample_video
from ltx_jax.model.upsampler.pixel_shuffle import pixel_shuffle_nd

TINY = {"in_channels": 8, "mid_channels": 64, "num_blocks_per_stage": 2}
VARIANTS = {
    "spatial_x2": {},
    "spatial_x2_dims2": {"dims": 2},
    "temporal_x2": {"spatial_upsample": False, "temporal_upsample": True},
    "spatiotemporal_x2": {"temporal_upsample": True},
    "rational_x1_5": {"rational_resampler": True, "spatial_scale": 1.5},
    "rational_x0_75": {"rational_resampler": True, "spatial_scale": 0.75},
    "rational_x2": {"rational_resampler": True, "spatial_scale": 2.0},
    "rational_x4": {"rational_resampler": True, "spatial_scale": 4.0},
}


def torch_upsampler(config: dict, seed: int = 0) -> TorchLatentUpsampler:
    """ltx-core's upsampler with random weights; GroupNorm affines are perturbed away from (1, 0)."""
    torch.manual_seed(seed)
    model = TorchConfigurator.from_config(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_((1.0 if name.endswith("weight") else 0.0) + 0.3 * torch.randn_like(param))
    return model


def jax_upsampler(config: dict, reference: TorchLatentUpsampler) -> LatentUpsampler:
    model = LatentUpsamplerConfigurator.from_config(config, rngs=nnx.Rngs(1))
    return ltx_jax.load_state_dict(model, reference.state_dict(), prefix="")


def latent(batch: int = 2, channels: int = 8, frames: int = 3, height: int = 5, width: int = 6) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((batch, channels, frames, height, width)).astype(np.float32)


@nnx.jit
def run(model: LatentUpsampler, x: jnp.ndarray) -> jnp.ndarray:
    return model(x)


@pytest.mark.parametrize("variant", VARIANTS)
def test_upsampler_parity(variant):
    config = {**TINY, **VARIANTS[variant]}
    reference = torch_upsampler(config)
    x = latent()
    with torch.no_grad():
        expected = reference(torch.from_numpy(x))
    ours = run(jax_upsampler(config, reference), jnp.asarray(x))
    assert ours.shape == tuple(expected.shape)
    assert relative_error(ours, expected) <= FLOAT32


def test_upsample_video_parity():
    reference = torch_upsampler(TINY)
    rng = np.random.default_rng(1)
    mean = rng.standard_normal(8).astype(np.float32)
    std = rng.uniform(0.5, 2.0, 8).astype(np.float32)
    stats = PerChannelStatistics(latent_channels=8)
    stats.get_buffer("mean-of-means").copy_(torch.from_numpy(mean))
    stats.get_buffer("std-of-means").copy_(torch.from_numpy(std))
    encoder = torch.nn.Module()
    encoder.per_channel_statistics = stats
    x = latent()
    with torch.no_grad():
        expected = torch_upsample_video(torch.from_numpy(x), encoder, reference)
        plain = reference(torch.from_numpy(x))
    ours = upsample_video(jnp.asarray(x), jax_upsampler(TINY, reference), jnp.asarray(mean), jnp.asarray(std))
    assert relative_error(ours, expected) <= FLOAT32
    assert relative_error(plain, expected) > 1e-2  # the statistics matter


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_pixel_shuffle_matches_einops(dims):
    from ltx_core.model.upsampler.pixel_shuffle import PixelShuffleND  # noqa: PLC0415

    shape = (2, 24, 3, 4, 5) if dims != 2 else (2, 24, 4, 5)
    factors = (2, 3, 2)[:dims] if dims == 3 else (3, 2, 2)
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    expected = PixelShuffleND(dims, factors)(torch.from_numpy(x)).numpy()
    np.testing.assert_array_equal(pixel_shuffle_nd(jnp.asarray(x), dims, factors), expected)


@pytest.mark.parametrize(("dims", "stride"), [(2, 2), (3, 3)])
def test_blur_downsample_parity(dims, stride):
    from ltx_core.model.upsampler.blur_downsample import BlurDownsample as TorchBlurDownsample  # noqa: PLC0415

    from ltx_jax.model.upsampler.blur_downsample import BlurDownsample  # noqa: PLC0415

    x = latent()[0] if dims == 2 else latent()
    expected = TorchBlurDownsample(dims, stride)(torch.from_numpy(x))
    ours = BlurDownsample(dims, stride)(jnp.asarray(x))
    assert ours.shape == tuple(expected.shape)
    assert relative_error(ours, expected) <= FLOAT32


def test_configurator_keys_and_metadata():
    config = {"_class_name": "LatentUpsampler", **TINY, "rational_resampler": True, "spatial_scale": 1.5}
    ours = LatentUpsamplerConfigurator.from_metadata({"config": config})
    expected = set(TorchConfigurator.from_config(config).state_dict())
    assert set(ltx_jax.convert.state_dict.expected_keys(ours)) == expected
    assert "upsampler.blur_down.kernel" in expected


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"mid_channel": 64}, "unknown keys"),
        ({**TINY, "mid_channels": 48}, "multiple of 32"),
        ({**TINY, "spatial_upsample": False}, "spatial_upsample or temporal_upsample"),
        ({**TINY, "spatial_scale": 1.5}, "rational_resampler=True"),
        ({**TINY, "rational_resampler": True, "spatial_scale": 3.0}, "spatial_scale=3.0"),
        ({**TINY, "dims": 2, "temporal_upsample": True}, "dims=2"),
    ],
)
def test_bad_config_raises(config, message):
    with pytest.raises(ValueError, match=message):
        LatentUpsamplerConfigurator.from_config(config)


def test_bad_inputs_raise():
    model = LatentUpsamplerConfigurator.from_config(TINY)
    with pytest.raises(ValueError, match="expects"):
        model(jnp.zeros((1, 4, 2, 4, 4)))
    with pytest.raises(ValueError, match="std has shape"):
        upsample_video(jnp.zeros((1, 8, 2, 4, 4)), model, jnp.zeros(8), jnp.ones(4))
