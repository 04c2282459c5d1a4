"""The video VAE (encoder, conv decoder, tiled decoding) against ltx-core 1.0.0 with the same weights (CPU)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from ltx_core.model.video_vae import (
    SpatialTilingConfig,
    TemporalTilingConfig,
    TilingConfig,
    VideoDecoderConfigurator,
    VideoEncoderConfigurator,
)
from ltx_core_twin import relative_error
from tolerances import FLOAT32

import ltx_jax
from ltx_jax.model.video_vae import (
    DimensionSizeConfig,
    SpatioTemporalScaleFactors,
    TileSizeConfig,
    decode_video,
    vae_decoder_state_dict,
    vae_encoder_state_dict,
    video_decoder_from_config,
    video_encoder_from_config,
)

BRANCH_EFFECT = 1e-3  # a config branch that matters moves the output far above the tolerance

ENCODER_BLOCKS = [  # every encoder block kind; 32x32 spatial and 8x temporal compression with patch_size 4
    ["res_x", {"num_layers": 1}],
    ["compress_space_res", {"multiplier": 2}],
    ["compress_time_res", {"multiplier": 2}],
    ["res_x_y", {"multiplier": 2}],
    ["compress_all_res", {"multiplier": 1}],
    ["compress_all", 1],
]
# Decoders end with base_channels (8) channels: PixelNorm over 4 channels divides by RMS values near 0
# often enough to amplify float32 rounding to ~1e-5 in both frameworks; 8 keeps parity at ~1e-6.
LTX2_DECODER = {  # LTX-2 19B's recipe, shrunk: compress_all with residual, timestep conditioning, reflect padding
    "decoder_base_channels": 8,
    "decoder_blocks": [
        ["res_x", {"num_layers": 1, "inject_noise": False}],
        ["compress_all", {"residual": True, "multiplier": 2}],
        ["res_x", {"num_layers": 1, "inject_noise": False}],
        ["compress_all", {"residual": True, "multiplier": 2}],
        ["res_x", {"num_layers": 2, "inject_noise": False}],
        ["compress_all", {"residual": True, "multiplier": 2}],
        ["res_x", {"num_layers": 1, "inject_noise": False}],
    ],
}
LTX2_3_DECODER = {  # LTX-2.3's recipe, shrunk: space/time/all upsamplers, zero padding
    "decoder_base_channels": 8,
    "spatial_padding_mode": "zeros",
    "timestep_conditioning": False,
    "decoder_blocks": [
        ["res_x", {"num_layers": 1}],
        ["compress_space", {"multiplier": 2}],
        ["res_x", {"num_layers": 1}],
        ["compress_time", {"multiplier": 2}],
        ["compress_all", {"multiplier": 1}],
        ["compress_all", {"multiplier": 2}],
        ["res_x", {"num_layers": 1}],
    ],
}
DECODERS = {
    "ltx2": LTX2_DECODER,
    "ltx2_3": LTX2_3_DECODER,
    "causal": {**LTX2_3_DECODER, "causal_decoder": True, "spatial_padding_mode": "replicate"},
    "group_norm": {**LTX2_3_DECODER, "norm_layer": "group_norm", "decoder_base_channels": 32},
    # res_x_y's multiplier counts toward the bottleneck width upstream but not in 1.0.0 (8 x base): a
    # product of 8 keeps both rules equal, as in every LTX-2 config.
    "res_x_y": {
        **LTX2_3_DECODER,
        "decoder_blocks": [
            ["res_x_y", {"multiplier": 2}],
            ["compress_space", {"multiplier": 2}],
            ["compress_time", {"multiplier": 1}],
            ["compress_all", {"multiplier": 1}],
            ["compress_all", {"multiplier": 2}],
            ["res_x", {"num_layers": 1}],
        ],
    },
}
ENCODERS = {
    "uniform": {"spatial_padding_mode": "zeros"},
    "per_channel_reflect": {"latent_log_var": "per_channel", "spatial_padding_mode": "reflect"},
    "constant_group_norm": {"latent_log_var": "constant", "norm_layer": "group_norm", "latent_channels": 32},
}


def vae_config(**vae) -> dict:
    """A checkpoint `config` dict: tiny latent width, the blocks above unless overridden."""
    return {"vae": {"latent_channels": 8, "patch_size": 4, "encoder_blocks": ENCODER_BLOCKS, **vae}}


def randomize(model: torch.nn.Module, seed: int = 0) -> None:
    """Unit-scale weights (fan-in scaled), statistics far from the identity, non-zero AdaLN tables and
    affine norms, all from `seed`, so that each branch matters and runs are reproducible."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in model.state_dict(keep_vars=True).items():
            noise = torch.randn(tensor.shape, generator=generator)
            if name.endswith("std-of-means"):
                tensor.copy_(0.5 + torch.rand(tensor.shape, generator=generator))
            elif name.endswith("mean-of-means") or "scale_shift_table" in name:
                tensor.copy_(0.5 * noise)
            elif name.endswith("timestep_scale_multiplier"):
                tensor.fill_(800.0)
            elif "norm" in name:
                tensor.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * noise)
            elif name.endswith("bias"):
                tensor.copy_(0.1 * noise)
            else:
                tensor.copy_(noise / tensor[0].numel() ** 0.5)


def twins(config: dict, part: str) -> tuple[torch.nn.Module, nnx.Module]:
    """ltx-core's encoder/decoder built by its configurator with random weights, and ours loaded from a
    checkpoint-style state dict (`vae.<part>.*` + `vae.per_channel_statistics.*`) through our filter."""
    configurator = {"encoder": VideoEncoderConfigurator, "decoder": VideoDecoderConfigurator}[part]
    reference = configurator.from_config(config)
    randomize(reference)
    reference.eval()
    checkpoint = {
        ("vae." if k.startswith("per_channel_statistics.") else f"vae.{part}.") + k: v
        for k, v in reference.state_dict().items()
    }
    build = {"encoder": video_encoder_from_config, "decoder": video_decoder_from_config}[part]
    select = {"encoder": vae_encoder_state_dict, "decoder": vae_decoder_state_dict}[part]
    # eval_shape skips the random init (slow eagerly on CPU); loading fills every parameter.
    ours = ltx_jax.load_state_dict(nnx.eval_shape(lambda: build(config, rngs=nnx.Rngs(0))), select(checkpoint), "")
    return reference, ours


@nnx.jit
def encode(encoder: nnx.Module, video: jax.Array) -> jax.Array:
    return encoder(video)


@nnx.jit
def decode(decoder: nnx.Module, latent: jax.Array, timestep=None, noise=None, key=None) -> jax.Array:
    return decoder(latent, timestep, noise=noise, key=key)


def random(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def run_torch(module: torch.nn.Module, *args, **kwargs) -> torch.Tensor:
    with torch.no_grad():
        return module(*(torch.from_numpy(a) for a in args), **kwargs)


@pytest.mark.parametrize("overrides", ENCODERS.values(), ids=ENCODERS.keys())
def test_encoder_parity(overrides):
    reference, ours = twins(vae_config(**overrides), "encoder")
    video = np.tanh(random((2, 3, 9, 64, 64)))
    expected = run_torch(reference, video)
    latent = encode(ours, jnp.asarray(video))
    assert latent.shape == tuple(expected.shape) == (2, reference.latent_channels, 2, 2, 2)
    assert relative_error(latent, expected) <= FLOAT32


def test_encoder_crops_frames_like_ltx_core():
    reference, ours = twins(vae_config(), "encoder")
    video = np.tanh(random((1, 3, 12, 32, 64)))  # 12 = 1 + 8 + 3 extra frames
    expected = run_torch(reference, video)
    assert relative_error(encode(ours, jnp.asarray(video)), expected) <= FLOAT32


def decode_both(config: dict, latent: np.ndarray, timestep: float | None = None) -> tuple[jax.Array, torch.Tensor]:
    reference, ours = twins(vae_config(**config), "decoder")
    generator = torch.Generator().manual_seed(7)
    # ltx-core's first draw from `generator` is the decode noise; ours takes the same values explicitly.
    noise = torch.randn(latent.shape, generator=torch.Generator().manual_seed(7)).numpy()
    kwargs = {"timestep": None if timestep is None else torch.full((latent.shape[0],), timestep)}
    expected = run_torch(reference, latent, generator=generator, **kwargs)
    noise = jnp.asarray(noise) if ours.timestep_conditioning else None
    return decode(ours, jnp.asarray(latent), timestep, noise), expected


@pytest.mark.parametrize("name", DECODERS)
def test_decoder_parity(name):
    # Reflect padding needs 2+ latent cells per side; zero-padded group_norm runs on a narrower latent (speed).
    shape = (2, 8, 2, 1, 2) if name == "group_norm" else (2, 8, 2, 2, 2)
    decoded, expected = decode_both(DECODERS[name], random(shape))
    assert decoded.shape == tuple(expected.shape) == (2, 3, 9, 32 * shape[3], 64)
    assert relative_error(decoded, expected) <= FLOAT32


def test_decoder_timestep_and_noise_matter():
    latent = random((2, 8, 2, 2, 2))
    decoded, expected = decode_both(LTX2_DECODER, latent, timestep=0.3)
    assert relative_error(decoded, expected) <= FLOAT32
    default_timestep, _ = decode_both(LTX2_DECODER, latent)
    assert relative_error(default_timestep, expected) > BRANCH_EFFECT
    _, ours = twins(vae_config(**LTX2_DECODER), "decoder")
    other_noise = decode(ours, jnp.asarray(latent), 0.3, key=jax.random.key(1))
    assert relative_error(other_noise, expected) > BRANCH_EFFECT


def test_timestep_conditioned_decoder_needs_noise_source():
    _, ours = twins(vae_config(**LTX2_DECODER), "decoder")
    with pytest.raises(ValueError, match="pass exactly one of key="):
        ours(jnp.zeros((1, 8, 2, 2, 2)))


TORCH_TILING = TilingConfig(  # 1.0.0's tiling: 2-latent tiles overlapping by 1 in space and time
    spatial_config=SpatialTilingConfig(tile_size_in_pixels=64, tile_overlap_in_pixels=32),
    temporal_config=TemporalTilingConfig(tile_size_in_frames=16, tile_overlap_in_frames=8),
)


def our_tiling(latent_shape: tuple[int, ...]) -> TileSizeConfig:
    """`TORCH_TILING` as upstream's per-axis config (the aspect-scaled tile sizes of 1.0.0)."""
    return TileSizeConfig.from_long_side(
        long_side=DimensionSizeConfig(64, 32),
        height=latent_shape[3] * 32,
        width=latent_shape[4] * 32,
        scale_factors=SpatioTemporalScaleFactors(8, 32, 32),
        frames=DimensionSizeConfig(16, 8),
    )


@pytest.mark.parametrize("name", ["ltx2", "ltx2_3"])
def test_tiled_decode_parity(name):
    reference, ours = twins(vae_config(**DECODERS[name]), "decoder")
    # ltx-core draws fresh noise per tile; with the noise scale at 0 both sides decode deterministically.
    reference.decode_noise_scale = ours.decode_noise_scale = 0.0
    latent = random((1, 8, 3, 3, 3))  # 2 x 2 x 2 tiles
    with torch.no_grad():
        expected = torch.cat(list(reference.tiled_decode(torch.from_numpy(latent), TORCH_TILING)), dim=2)
    noise = jnp.zeros(latent.shape) if ours.timestep_conditioning else None
    chunks = list(ours.tiled_decode(jnp.asarray(latent), our_tiling(latent.shape), noise=noise))
    assert len(chunks) == 2
    tiled = jnp.concatenate(chunks, axis=2)
    assert tiled.shape == tuple(expected.shape) == (1, 3, 17, 96, 96)
    assert relative_error(tiled, expected) <= FLOAT32
    assert relative_error(tiled, decode(ours, jnp.asarray(latent), noise=noise)) > BRANCH_EFFECT  # the tiles did blend


def test_tiled_equals_untiled_for_a_pointwise_decoder():
    """With only the centre tap of every 3x3x3 kernel left, each pixel depends on its own latent cell
    only, so the tiles' blend masks must add up to exactly the untiled decode. Tolerance: the float32
    sum of up to 8 masked copies divided by the summed masks, a few ulps; FLOAT32 bounds it."""
    reference, _ = twins(vae_config(**LTX2_DECODER), "decoder")
    with torch.no_grad():
        for name, tensor in reference.state_dict(keep_vars=True).items():
            if name.endswith("conv.weight") and tensor.shape[-1] == 3:
                centre = tensor[:, :, 1, 1, 1].clone()
                tensor.zero_()
                tensor[:, :, 1, 1, 1] = centre
    ours = nnx.eval_shape(lambda: video_decoder_from_config(vae_config(**LTX2_DECODER), rngs=nnx.Rngs(0)))
    ltx_jax.load_state_dict(ours, reference.state_dict(), prefix="")
    latent, noise = jnp.asarray(random((1, 8, 3, 3, 3))), jnp.asarray(random((1, 8, 3, 3, 3), seed=1))
    tiled = decode_video(ours, latent, our_tiling(latent.shape), noise=noise)
    assert relative_error(tiled, decode(ours, latent, noise=noise)) <= FLOAT32


def test_tiling_geometry():
    tiles = TileSizeConfig.default().tiles((16, 40, 48), SpatioTemporalScaleFactors(8, 32, 32))
    frames = sorted({(t.in_coords[0].start, t.in_coords[0].stop) for t in tiles})
    assert frames == [(0, 10), (6, 16)]  # 10-latent tiles, 3 overlapping + the causal extra frame
    assert {(t.in_coords[1].start, t.in_coords[1].stop) for t in tiles} == {(0, 24), (22, 40)}
    with pytest.raises(ValueError, match="multiples of 32"):
        TileSizeConfig(height=DimensionSizeConfig(100, 32)).tiles((2, 8, 8), (8, 32, 32))


def test_strict_load_names_missing_key():
    reference, ours = twins(vae_config(**LTX2_DECODER), "decoder")
    state = dict(reference.state_dict())
    del state["up_blocks.0.res_blocks.0.conv1.conv.bias"]
    with pytest.raises(ValueError, match=r"1 missing keys: up_blocks\.0\.res_blocks\.0\.conv1\.conv\.bias"):
        ltx_jax.load_state_dict(ours, state, prefix="")


def test_config_errors_name_the_value():
    with pytest.raises(ValueError, match=r"vae.norm_layer='batch_norm' is not valid"):
        video_decoder_from_config(vae_config(norm_layer="batch_norm"), rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="inject_noise=True"):
        video_decoder_from_config(
            vae_config(decoder_blocks=[["res_x", {"num_layers": 1, "inject_noise": True}]]), rngs=nnx.Rngs(0)
        )
    with pytest.raises(ValueError, match="CausalDiffusionVAE"):
        video_decoder_from_config({"vae": {"_class_name": "CausalDiffusionVAE"}}, rngs=nnx.Rngs(0))


def test_tiles_spread_over_the_mesh_devices_give_the_same_video():
    """`devices=`: the 8 tiles of a 3x3x3 latent decode on 8 (simulated) devices, blended on the first;
    the same computation per tile, so the same video as on one device."""
    _, ours = twins(vae_config(**LTX2_DECODER), "decoder")
    latent, noise = jnp.asarray(random((1, 8, 3, 3, 3))), jnp.asarray(random((1, 8, 3, 3, 3), seed=1))
    one_device = decode_video(ours, latent, our_tiling(latent.shape), noise=noise)
    spread = decode_video(ours, latent, our_tiling(latent.shape), noise=noise, devices=jax.devices())
    assert len(jax.devices()) == 8
    assert relative_error(spread, one_device) <= FLOAT32
    assert spread.devices() == {jax.devices()[0]}


def test_repeated_tiled_decodes_reuse_the_compiled_tiles():
    """A second `decode_video` with the same decoder and tile shapes compiles nothing new."""
    from ltx_jax.model.video_vae.conv_video_decoder import _decode_tile

    _, ours = twins(vae_config(**LTX2_DECODER), "decoder")
    latent, noise = jnp.asarray(random((1, 8, 3, 3, 3))), jnp.asarray(random((1, 8, 3, 3, 3), seed=1))
    first = decode_video(ours, latent, our_tiling(latent.shape), noise=noise)
    compiled = _decode_tile._cache_size()
    second = decode_video(ours, latent, our_tiling(latent.shape), noise=noise)
    assert _decode_tile._cache_size() == compiled
    assert np.array_equal(np.asarray(first), np.asarray(second))


def test_tiles_compiled_ahead_are_not_compiled_again():
    """`compile_tiles` compiles what a tiled decode over the devices runs for a latent of that shape
    (placed on the first device, noise from a key), so the decode itself compiles no tile."""
    from ltx_jax.model.video_vae.conv_video_decoder import _decode_tile

    _, ours = twins(vae_config(**LTX2_DECODER), "decoder")
    latent = jax.device_put(jnp.asarray(random((1, 8, 2, 3, 4))), jax.devices()[0])  # a shape no other test uses
    tiling = our_tiling(latent.shape)
    programs = ours.compile_tiles(
        jax.ShapeDtypeStruct(latent.shape, latent.dtype, sharding=latent.sharding), tiling, jax.devices()
    )
    assert programs >= 2  # tiles of different shapes, on different devices
    compiled = []

    def record(event, duration, fun_name="", **kwargs):
        compiled.append(fun_name)

    jax.monitoring.register_event_duration_secs_listener(record)
    try:
        decode_video(
            ours, latent, tiling, key=jax.device_put(jax.random.key(0), jax.devices()[0]), devices=jax.devices()
        )
    finally:
        jax.monitoring.unregister_event_duration_listener(record)
    assert f"jit({_decode_tile.__name__})" not in compiled


def test_vae_memory_benchmark_code_path_on_cpu():
    """benchmarks/bench_vae_memory.py at a tiny size on CPU (no peak there): our tiled decode, ltx-core's
    tiled decode, the table; and its `tiled_small` tiles are ltx-core 1.0.0's at the full 1024x1536x121."""
    import argparse  # noqa: PLC0415 - only this test needs the script and its helpers
    import importlib.util  # noqa: PLC0415
    import pathlib  # noqa: PLC0415

    path = pathlib.Path(__file__).parents[1] / "benchmarks" / "bench_vae_memory.py"
    spec = importlib.util.spec_from_file_location("bench_vae_memory", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    config, pixels = bench.CONFIGS["tiny"], bench.parse_pixels("64x64x9")
    ours = bench.run_jax(config, pixels, "tiled_small", cache_dir="", calls=1)
    theirs = bench.run_torch(config, pixels, on_cpu=True, calls=1)
    for result in ours, theirs:
        assert "error" not in result, result["error"]
        assert result["latent"] == [1, 8, 2, 2, 2]
        assert result["output"] == [1, 3, 9, 64, 64]
        assert result["finite"]
    assert ours["params"] == theirs["params"]  # same config, same modules
    rows = [
        {"framework": "jax", "variant": "tiled_small", "compiling": ours, "measured": ours},
        {"framework": "ltx-core", "variant": "tiled_small", "measured": theirs},
    ]
    assert "| ltx-core | tiled_small | 1 | 2x2x2 | n/a | - |" in bench.table(rows)

    full = (1024, 1536, 121)
    latent = torch.empty(bench.latent_shape(bench.CONFIGS["ltx2"], full), device="meta")
    assert latent.shape == (1, 128, 16, 32, 48)  # 32 x 32 x 8 compression, causal first frame
    reference = VideoDecoderConfigurator.from_config({"vae": config})._prepare_tiles(latent, bench.torch_tiling())
    tiles = bench.jax_tiling("tiled_small", full).tiles(latent.shape[2:], SpatioTemporalScaleFactors(8, 32, 32))
    assert [t.in_coords[2:] for t in reference] == [t.in_coords for t in tiles]
    assert len(tiles) == 18
    with pytest.raises(argparse.ArgumentTypeError, match=r"frames 1 \+ 8k"):
        bench.parse_pixels("64x64x10")


def test_video_decoding_streams_chunks_that_join_into_the_tiled_video():
    """`VideoDecoding.chunks`: one uint8 chunk per temporal group, of the lengths `tiled_chunk_frames` gives
    and `compile_ahead` compiled for (nothing compiles when decoding), joined equal to the whole tiled decode."""
    from ltx_jax.model.video_vae.conv_video_decoder import _decode_tile
    from ltx_jax.pipeline.decoders import VideoDecoding, frames_uint8

    _, ours = twins(vae_config(**LTX2_DECODER), "decoder")
    latent = jnp.asarray(random((1, 8, 4, 2, 3)))  # a shape no other test uses; three temporal groups
    tiling, devices = our_tiling(latent.shape), jax.devices()[:2]
    decoding = VideoDecoding(ours, devices, tiling)
    decoding.compile_ahead(latent.shape, latent.dtype)
    compiled = []

    def record(event, duration, fun_name="", **kwargs):
        compiled.append(fun_name)

    jax.monitoring.register_event_duration_secs_listener(record)
    try:
        chunks = decoding.chunks(latent, seed=5)
    finally:
        jax.monitoring.unregister_event_duration_listener(record)
    assert {f"jit({_decode_tile.__name__})", f"jit({frames_uint8.__name__})"}.isdisjoint(compiled)
    assert [chunk.shape[0] for chunk in chunks] == ours.tiled_chunk_frames(latent.shape, tiling) == [0, 8, 17]
    whole = decode_video(ours, latent, tiling, key=jax.random.key(5), devices=devices)
    expected = np.asarray(frames_uint8(whole))
    np.testing.assert_array_equal(np.concatenate([np.asarray(chunk) for chunk in chunks]), expected)
    np.testing.assert_array_equal(decoding(latent, 5), expected)
