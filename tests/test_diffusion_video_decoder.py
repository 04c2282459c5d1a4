"""LTX-2.5's diffusion video decoder: the neighbourhood attention against dense masked attention built here from
the window rule, and the op, the W-chunked stage-5 attention, every stage and whole decodes against ltx-core
1.2.0 (fixtures recorded by tests/record_diffusion_decoder.py, which says what they hold); the loader's
strictness."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from ltx_core_twin import relative_error
from safetensors import safe_open
from safetensors.numpy import load_file, save_file
from tolerances import FLOAT32

from ltx_jax.convert.state_dict import load_state_dict
from ltx_jax.model.normalization import RMSNorm
from ltx_jax.model.video_vae.diffusion_blocks import NeighborhoodAttention3D, WChunkPlan, modulate
from ltx_jax.model.video_vae.diffusion_tiled_decode import TiledLayout, tiled_chunk_frames, tiled_decode
from ltx_jax.model.video_vae.diffusion_tiling import TileGeometry, recommended_tiling
from ltx_jax.model.video_vae.diffusion_video_decoder import DiffusionDecoderConfig, DiffusionVideoDecoder
from ltx_jax.model.video_vae.model_configurator import diffusion_decoder_config, load_diffusion_video_decoder
from ltx_jax.model.video_vae.neighborhood_attention import neighborhood_attention
from ltx_jax.model.video_vae.tiling import DimensionSizeConfig, TileSizeConfig

FIXTURES = Path(__file__).parent / "fixtures" / "ltx25_diffusion_decoder"
FILE = FIXTURES / "decoder.safetensors"
RECORDED = np.load(FIXTURES / "decoder.npz")
ATTENTION = np.load(FIXTURES / "attention.npz")
NOISE_SEEDS = {"video": 1, "x0_video": 2}  # as the recorder's


def noise(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """The recorder's decoder noise (numpy's PCG64), checked against the checksum it stored."""
    drawn = np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)
    key = "video_noise_sum" if seed == NOISE_SEEDS["video"] else "x0_noise_sum"
    assert np.isclose(drawn.sum(dtype=np.float64), RECORDED[key], rtol=0, atol=1e-6), "numpy drew other noise"
    return drawn


@pytest.fixture(scope="module")
def decoder() -> DiffusionVideoDecoder:
    return load_diffusion_video_decoder(FILE)


def dense_neighborhood_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, kernel: tuple[int, ...]) -> np.ndarray:
    """float64 softmax attention over the whole volume, masked to each query's window: per axis the keys
    [s, s + k) with s = clamp(i - k // 2, 0, L - k)."""
    b, *dims, heads, width = q.shape
    visible = np.ones((1, 1), bool)
    for n, kk in zip(dims, kernel, strict=True):
        start = np.clip(np.arange(n) - kk // 2, 0, n - kk)[:, None]
        axis = (np.arange(n)[None, :] >= start) & (np.arange(n)[None, :] < start + kk)  # (query, key)
        visible = (visible[:, None, :, None] & axis[None, :, None, :]).reshape(visible.shape[0] * n, -1)
    flat = [a.astype(np.float64).reshape(b, -1, heads, width) for a in (q, k, v)]
    logits = np.where(visible[None, None], np.einsum("bqnd,bknd->bnqk", flat[0], flat[1]), -np.inf)
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    return np.einsum("bnqk,bknd->bqnd", probs / probs.sum(-1, keepdims=True), flat[2]).reshape(q.shape)


@pytest.mark.parametrize(
    ("shape", "kernel", "tile"),
    [
        ((1, 5, 7, 9, 2, 8), (3, 3, 5), (2, 3, 4)),  # tiles that do not divide the volume
        ((2, 3, 4, 5, 1, 4), (3, 3, 3), (4, 8, 8)),  # one tile; the kernel covers T
        ((1, 6, 6, 11, 2, 8), (5, 1, 7), (3, 5, 2)),  # k = 1, windows shifted in at both W borders
        ((1, 7, 3, 4, 1, 4), (7, 3, 3), (1, 1, 1)),  # kernels as long as their axes, one query per tile
    ],
)
def test_neighborhood_attention_equals_dense_masked_attention(shape, kernel, tile):
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(shape, dtype=np.float32) for _ in range(3))
    ours = neighborhood_attention(*map(jnp.asarray, (q, k, v)), kernel, query_tile=tile, tiles_per_step=3)
    assert relative_error(ours, dense_neighborhood_attention(q, k, v, kernel)) <= FLOAT32


@pytest.mark.parametrize("case", [0, 1, 2])
def test_neighborhood_attention_equals_ltx_core_eager_na3d(case):
    q, k, v, out = (ATTENTION[f"na{case}.{name}"] for name in ("q", "k", "v", "out"))
    ours = neighborhood_attention(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v), tuple(ATTENTION[f"na{case}.kernel"]))
    assert relative_error(ours, out) <= FLOAT32


@pytest.mark.parametrize("width", [3, 5, 13])
def test_w_chunked_attention_residual_equals_ltx_core(width):
    """Stage 5's attention residual in 4 W slabs with halos: a slab narrower than the halo (3), a right halo cut
    short by the volume's end (5, 13), two heads, batch 2."""
    weights = {k.removeprefix("chunked."): v for k, v in ATTENTION.items() if k.startswith("chunked.")}
    attn = NeighborhoodAttention3D(
        32, (3, 3, 5), head_dim=16, rope_dim_split=None, rngs=nnx.Rngs(0), param_dtype=jnp.float32
    )
    norm = RMSNorm(32)
    load_state_dict(attn, {k.removeprefix("attn."): v for k, v in weights.items() if k.startswith("attn.")}, prefix="")
    load_state_dict(norm, {"weight": weights["norm.weight"]}, prefix="")
    x, scale, shift = (jnp.asarray(ATTENTION[f"chunked{width}.{name}"]) for name in ("x", "scale", "shift"))
    plan = WChunkPlan.build(width, 4, 2)
    ours = x + attn.chunked(modulate(norm(plan.slabs(x)), scale[:, None], shift[:, None]), plan)
    assert relative_error(ours, ATTENTION[f"chunked{width}.out"]) <= FLOAT32


def test_the_stem_equals_ltx_core(decoder):
    """Size floors (3 latent frames), the trailing frames, un-normalise, conv_in."""
    ours = decoder.stem(decoder.pad(jnp.asarray(RECORDED["latent"])))
    assert relative_error(ours, RECORDED["stem"]) <= FLOAT32


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_each_deterministic_stage_equals_ltx_core(decoder, stage):
    """Stage `stage` on the reference's previous stage: its NABlocks and upsampler (stages 2, 3 double time)."""
    previous = RECORDED["stem" if stage == 1 else f"stage_{stage - 1}"]
    assert relative_error(decoder.det_stage(jnp.asarray(previous), stage - 1), RECORDED[f"stage_{stage}"]) <= FLOAT32


def test_the_context_equals_ltx_core(decoder):
    """Stage 4 on the reference's stage 3, its trailing frames cropped."""
    assert relative_error(decoder.context(jnp.asarray(RECORDED["stage_3"])), RECORDED["context"]) <= FLOAT32


def test_a_stage_5_step_equals_ltx_core(decoder):
    """One model call at t = 1 on the reference's context: gates folded, AdaLN, W-chunked attention."""
    x_t = noise(tuple(RECORDED["video_noise_shape"]), NOISE_SEEDS["video"])
    ours = decoder.step(jnp.asarray(RECORDED["context"]), jnp.asarray(x_t), jnp.ones((1,)))
    assert relative_error(ours, RECORDED["step"]) <= FLOAT32


def test_the_untiled_decode_equals_ltx_core(decoder):
    """Two Euler steps on v from the caller's noise; 9 frames of 64 x 64 (the floors padded time to 17)."""
    latent = jnp.asarray(RECORDED["latent"])
    assert decoder.noise_shape(latent.shape) == tuple(RECORDED["video_noise_shape"])
    video = decoder(latent, jnp.asarray(noise(decoder.noise_shape(latent.shape), NOISE_SEEDS["video"])))
    assert relative_error(video, RECORDED["video"]) <= FLOAT32


def test_an_x0_single_step_decode_below_the_size_floors_equals_ltx_core(decoder):
    """One latent pixel padded to (3, 2, 2), one x0 step at timestep_scale_multiplier 1000 (noise drawn at stage
    5's size), cropped back to one 32 x 32 frame."""
    x0 = nnx.merge(*nnx.split(decoder))
    x0.config = dataclasses.replace(decoder.config, **json.loads(str(RECORDED["x0_config"])))
    latent = jnp.asarray(RECORDED["x0_latent"])
    assert x0.noise_shape(latent.shape) == tuple(RECORDED["x0_noise_shape"])
    video = x0(latent, jnp.asarray(noise(x0.noise_shape(latent.shape), NOISE_SEEDS["x0_video"])))
    assert relative_error(video, RECORDED["x0_video"]) <= FLOAT32


def recorded_tiling() -> TileSizeConfig:
    """The recorder's TILING: 12-frame tiles overlapping by 8, 48-px tiles by 32 (the least this decoder allows)."""
    return TileSizeConfig(**{k: DimensionSizeConfig(*v) for k, v in json.loads(str(RECORDED["tiling"])).items()})


def test_a_tiled_decode_equals_ltx_core(decoder):
    """3 x 2 x 2 tiles over the floored latent's 9 x 8 x 8 stage-4 cells (a first, a middle and a trailing tile in
    time): stages 4-5 per tile, blended in pixel space, chunks cut to the latent's 9 frames; the noise is upstream's
    one draw for the whole floored video (the recorder saw exactly one, of `video_shape`)."""
    latent = jnp.asarray(RECORDED["latent"])
    assert [tuple(s) for s in RECORDED["tiled_noise_shapes"]] == [decoder.video_shape(latent.shape)]
    drawn = jnp.asarray(noise(decoder.video_shape(latent.shape), NOISE_SEEDS["video"]))
    chunks = list(tiled_decode(decoder, latent, recorded_tiling(), noise=drawn))
    assert [c.shape[2] for c in chunks] == tiled_chunk_frames(decoder, latent.shape, recorded_tiling()) == [3, 4, 2]
    assert relative_error(jnp.concatenate(chunks, axis=2), RECORDED["tiled_video"]) <= FLOAT32


def test_tiles_have_upstreams_stage_5_canvases(decoder):
    """An x0 single-step decoder draws noise per tile in upstream, of the tile's stage-5 size: those sizes (first
    tiles drop a frame, trailing ones keep at least k_t) are the canvases our tiles denoise."""
    x0 = dataclasses.replace(decoder.config, **json.loads(str(RECORDED["x0_config"])))
    layout = TiledLayout.of(decoder, tuple(RECORDED["x0_latent"].shape), recorded_tiling())
    geometry = TileGeometry.of(x0)
    canvases = [
        (*layout.video[:2], geometry.stage5_frames(t.cells[0][1] - t.cells[0][0], t.first, t.trailing),
         t.out[1][1] - t.out[1][0], t.out[2][1] - t.out[2][0])
        for _, tiles in layout.groups for t in tiles
    ]  # fmt: skip
    assert canvases == [tuple(s) for s in RECORDED["x0_tiled_noise_shapes"]]


def test_tiles_spread_over_8_devices_give_the_same_video(decoder):
    """The same key on one device and on the mesh's 8 simulated ones (two tiles in W, round-robin: on the first two,
    blended on the first): the video's noise is one draw from the key, so the video is the same."""
    devices = jax.devices()
    latent, key = jax.device_put((jnp.asarray(RECORDED["latent"]), jax.random.key(7)), devices[0])
    tiling = TileSizeConfig(width=recorded_tiling().width)
    one = jnp.concatenate(list(tiled_decode(decoder, latent, tiling, key=key, devices=devices[:1])), axis=2)
    spread = jnp.concatenate(list(tiled_decode(decoder, latent, tiling, key=key, devices=devices)), axis=2)
    assert len(devices) == 8
    assert relative_error(spread, one) <= FLOAT32
    assert spread.devices() == {devices[0]}


@pytest.mark.parametrize(
    ("axis", "size", "named"),
    [
        ("frames", DimensionSizeConfig(13, 8), r"tiling\.frames=.* multiples of 2"),
        ("height", DimensionSizeConfig(48, 16), r"tiling\.height\.overlap=16 is below the 32 px"),
        ("width", DimensionSizeConfig(8, 0), r"tiling\.width=.* tile_size >= 16"),
    ],
)
def test_a_tile_size_the_decoder_cannot_use_is_refused_naming_the_argument(decoder, axis, size, named):
    with pytest.raises(ValueError, match=named):
        TiledLayout.of(decoder, (1, 8, 2, 2, 3), dataclasses.replace(TileSizeConfig(), **{axis: size}))


def test_recommended_tiles_are_upstreams_auto_tiling():
    """`recommended_tiling` for the recorded budgets: the class defaults at 1024 x 1536 x 121 in 80 GiB (one tile),
    4 GiB, 6 GiB at 704 x 1280 x 257, nothing in 1 GiB; the tiny decoder in a few MiB above its 2 GiB floor."""
    for case in json.loads(str(RECORDED["recommended"])):
        config = diffusion_decoder_config({"vae": {"_class_name": "CausalDiffusionVAE", "decoder": case["decoder"]}})
        frames, height, width = case["video"]
        kwargs = {"frames": frames, "height": height, "width": width, "free_bytes": case["free_bytes"]}
        if case["tiling"] is None:
            with pytest.raises(ValueError, match="pass the tiling explicitly"):
                recommended_tiling(config, model_bytes=0, **kwargs)
            continue
        ours = recommended_tiling(config, model_bytes=0, **kwargs)
        assert [[d.tile_size, d.overlap] for d in (ours.frames, ours.height, ours.width)] == case["tiling"], case
    assert TileGeometry.of(DiffusionDecoderConfig()).overlaps == (8, 96)  # ltx25-reference.md §4


def rewritten(tmp_path: Path, edit: dict[str, np.ndarray | None]) -> Path:
    """The fixture file with tensors replaced, added, or (None) removed."""
    tensors = load_file(FILE)
    for key, value in edit.items():
        if value is None:
            del tensors[key]
        else:
            tensors[key] = value
    save_file(tensors, tmp_path / "edited.safetensors", metadata=file_metadata())
    return tmp_path / "edited.safetensors"


def file_metadata() -> dict[str, str]:
    with safe_open(FILE, "np") as f:
        return f.metadata()


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        ({"decoder.det_stages.1.0.attn.qkv.weight": None}, "det_stages.1.0.attn.qkv.to_q.weight"),
        ({"decoder.norm_out.weight": None}, "norm_out.weight"),
        (
            {"decoder.det_stages.0.0.attn.extra.weight": np.zeros((2, 2), np.float32)},
            "det_stages.0.0.attn.extra.weight",
        ),
        ({"decoder.diff_blocks.0.gate_xyz": np.zeros(16, np.float32)}, "diff_blocks.0.gate_xyz"),
        ({"decoder.det_stages.0.0.gate_ctx": np.ones(32, np.float32)}, "det_stages.0.0.gate_ctx"),
    ],
    ids=["missing-qkv", "missing-norm", "unknown-tensor", "unknown-gate-name", "gate-without-linear"],
)
def test_the_loader_refuses_a_file_with_a_missing_or_unknown_key(tmp_path, edit, named):
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        load_diffusion_video_decoder(rewritten(tmp_path, edit))


def same_weights(a: DiffusionVideoDecoder, b: DiffusionVideoDecoder) -> bool:
    leaves = [jax.tree.leaves(nnx.state(d)) for d in (a, b)]
    return all(np.array_equal(x, y) for x, y in zip(*leaves, strict=True))


def test_the_loader_ignores_what_is_not_the_decoders(tmp_path, decoder):
    """The encoder's tensors, statistics the decoder does not use, the unused `type_emb`."""
    extra = {
        "encoder.conv_in.conv.weight": np.ones((4, 3), np.float32),
        "per_channel_statistics.mean-of-stds": np.ones(8, np.float32),
        "decoder.type_emb": np.ones(4, np.float32),
    }
    assert same_weights(load_diffusion_video_decoder(rewritten(tmp_path, extra)), decoder)


def test_the_loader_reads_vae_prefixed_keys(tmp_path, decoder):
    """A monolithic file's `vae.decoder.*`, `vae.per_channel_statistics.*` (upstream's loader reads both)."""
    tensors = load_file(FILE)
    save_file({f"vae.{k}": v for k, v in tensors.items()}, tmp_path / "vae.safetensors", metadata=file_metadata())
    assert same_weights(load_diffusion_video_decoder(tmp_path / "vae.safetensors"), decoder)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"mlp_ratio": 2}, "mlp_ratio"),
        ({"resampler_kind": "conv"}, "resampler_kind"),
        ({"stage5_kernel": [3, 4, 5]}, "odd"),
    ],
)
def test_the_config_refuses_what_is_not_ported(change, named):
    config = json.loads(file_metadata()["config"])
    config["vae"]["decoder"].update(change)
    with pytest.raises(ValueError, match=named):
        diffusion_decoder_config(config)
