"""Records ltx-core 1.2.0's diffusion video decoder (LTX-2.5's `CausalDiffusionVAE`) on a tiny random model into
tests/fixtures/ltx25_diffusion_decoder/ (CI has no 1.2.0; tests/test_diffusion_video_decoder.py reads them).

Run it with the 1.2.0 environment (see tests/record_ltx25_fixtures.py); `--check` records again into a temporary
folder and compares every tensor, array and metadata value with the committed ones:

    python tests/record_diffusion_decoder.py [--check]

The decoder runs as ltx-pipelines builds it (`VideoDecoder` in `ltx_pipelines/utils/blocks.py`): loaded from the
file through `video_decoder_sd_ops_for_checkpoint` (qkv split, `t_embedder.mlp` renames, `coarse_*` dropped,
gates folded) with the default `DiffVAEMode.CHUNKED_EAGER`, which on this CPU host (no natten, no Triton) runs
the eager tiled-SDPA neighbourhood attention. Float32 throughout; whole decodes untiled (`tiling_config=None`).
The decoder noise is not stored: it is `noise(shape, seed)` below (numpy's PCG64), handed to the decoder in
place of its `torch.randn` draw; the fixture keeps a checksum of it.

Writes:
    decoder.safetensors  the tiny decoder as a CausalDiffusionVAE file: bare `decoder.*` and
                         `per_channel_statistics.*` keys (the split `vae/` layout; 1.2.0 also reads `vae.`-prefixed
                         ones), a fused `qkv` per attention, `t_embedder.mlp.{0,2}`, static gates
                         (`gate_msa`, `gate_mlp`, `gate_ctx`) per diffusion block, a `coarse_head` (the name is a
                         guess: only its `coarse_` prefix is upstream's), and `config` metadata
                         {"vae": {"_class_name": "CausalDiffusionVAE", "decoder": DECODER, "model_output_type": "v"}}
    decoder.npz          for LATENT: the stem (un-normalise + conv_in of the padded latent), stages 1-3, the
                         context (stage 4 upsampled, its trailing pad cropped), one stage-5 call at t = 1 on the
                         noise, and the whole decode; for X0_LATENT (below every size floor) the whole decode
                         with one x0 step and timestep_scale_multiplier 1000; LATENT decoded in TILING's tiles
                         (`tiled_decode`: stages 1-3 whole, stages 4-5 per tile), from ONE draw of noise for the
                         whole floored video (recorded: how many draws and their shape); the noise shapes the x0
                         decoder draws in the same tiles of X0_LATENT (one per tile, of its stage-5 size); the
                         tile sizes AUTO_TILING picks for RECOMMEND_CASES
    attention.npz        the eager `na3d` alone (NA_CASES), and `chunked/attn.py::chunked`, the W-chunked stage-5
                         attention residual, on odd widths (CHUNKED_WIDTHS)
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "ltx25_diffusion_decoder"
sys.path.insert(0, str(HERE))
from record_ltx25_fixtures import recorder_command  # noqa: E402
from torchaudio_stand_in import torchaudio_stand_in  # noqa: E402

with torchaudio_stand_in():
    from ltx_core.loader.registry import ModelRegistry
    from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
    from ltx_core.model.video_vae import diffusion_tiling
    from ltx_core.model.video_vae.diffusion_tiling import recommended_decode_tiling_config
    from ltx_core.model.video_vae.model_configurator import (
        VideoDecoderConfigurator,
        diffvae_tiling_geometry_from_vae_config,
        video_decoder_sd_ops_for_checkpoint,
    )
    from ltx_core.model.video_vae.transformer import (
        DiffVAEMode,
        EagerSdpaAttention,
        NeighborhoodAttention3D,
        build_diffvae_mode_op,
    )
    from ltx_core.model.video_vae.transformer.chunked.attn import chunked
    from ltx_core.model.video_vae.transformer.fallback_na.eager import na3d
    from ltx_core.tiling import DimensionSizeConfig, TileSizeConfig
    from safetensors.torch import save_file

SEED = 0
# Tiny, every stage's kernel smaller than its volume somewhere; two heads (32 wide) in stages 1-2, one after.
DECODER = {
    "_class_name": "NADiffusionDecoder", "in_channels": 8, "out_channels": 3, "patch_size": 4, "head_dim": 16,
    "t_emb_dim": 16, "stage_channels": [32, 32, 16, 16, 16], "stage_depths": [2, 1, 1, 1, 2],
    "stage_kernels": [[3, 1, 1], [3, 3, 3], [3, 3, 3], [3, 5, 5], [3, 3, 3]],
    "upsamples": [[[1, 2, 2], 1], [[2, 1, 1], 2], [[2, 2, 2], 1], [[2, 2, 2], 1]],
    "stage5_kernel": [3, 5, 5], "default_num_inference_steps": 2, "timestep_scale_multiplier": 1.0,
}  # fmt: skip
VAE = {"_class_name": "CausalDiffusionVAE", "decoder": DECODER, "model_output_type": "v"}
LATENT = (1, 8, 2, 2, 2)  # padded to 3 frames by the size floors (3, 2, 2): 9 frames of 64 x 64 kept
X0_LATENT = (1, 8, 1, 1, 1)  # padded to (3, 2, 2): one 32 x 32 frame kept
X0 = {"model_output_type": "x0", "default_num_inference_steps": 1, "timestep_scale_multiplier": 1000.0}
NOISE_SEEDS = {"video": 1, "x0_video": 2}
# Tiled decodes of LATENT: (frames, height, width) (tile_size, overlap), the least overlaps this decoder's halos allow
# (8 frames, 32 px); 3 x 2 x 2 tiles over the 9 x 8 x 8 stage-4 cells of the floored latent.
TILING = {"frames": (12, 8), "height": (48, 32), "width": (48, 32)}
# `recommended_decode_tiling_config` (AUTO_TILING, CHUNKED_EAGER, model_bytes 0: its 1 GiB floor) for (decoder config,
# (frames, height, width), free bytes); "defaults" is the class defaults (upstream needs head_dim and stage_channels).
DEFAULTS = {"head_dim": 64, "stage_channels": [1024, 512, 256, 256, 128]}
RECOMMEND_CASES = [
    (DEFAULTS, (121, 1024, 1536), 80 << 30), (DEFAULTS, (121, 1024, 1536), 4 << 30),
    (DEFAULTS, (257, 704, 1280), 6 << 30), (DEFAULTS, (121, 1024, 1536), 1 << 30),
    (DECODER, (17, 128, 192), (2 << 30) + (12 << 20)), (DECODER, (17, 128, 192), (2 << 30) + (2 << 20)),
]  # fmt: skip
# (q shape (B, T, H, W, N, D), kernel): windows at every border, odd sizes, a kernel as long as its axis, k = 1.
NA_CASES = [((1, 5, 7, 9, 2, 8), (3, 3, 5)), ((2, 3, 4, 6, 1, 8), (3, 3, 3)), ((1, 4, 5, 11, 2, 4), (1, 5, 7))]
CHUNKED_WIDTHS = (3, 5, 13)  # kernel (3, 3, 5), 4 slabs: narrower than the halo, short last slabs (16: LATENT)


def noise(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Standard-normal float32 noise, reproducible without torch (the test draws the same)."""
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def randomize(module: torch.nn.Module, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Seeded random state: norm weights and statistics' stds around 1, matrices N(0, 1 / fan_in), vectors
    N(0, 0.1^2) (biases large enough to matter)."""
    out = {}
    for name, tensor in module.state_dict().items():
        if name.endswith("norm.weight") or "std" in name:
            out[name] = torch.rand(tensor.shape, generator=gen) + 0.5
        elif tensor.ndim >= 2:
            out[name] = torch.randn(tensor.shape, generator=gen) / math.sqrt(math.prod(tensor.shape[1:]))
        else:
            out[name] = torch.randn(tensor.shape, generator=gen) * 0.1
    return out


def checkpoint_tensors(weights: dict[str, torch.Tensor], gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Module weights -> the file's keys, the inverse of 1.2.0's loader: `qkv` fused, `t_embedder.mlp.{0,2}`,
    a gate per diffusion block linear (the file's linear is the module's divided by it), a `coarse_head`."""
    out: dict[str, torch.Tensor] = {}
    for key, value in weights.items():
        if key.startswith("per_channel_statistics."):
            out[key] = value
            continue
        key = key.replace("t_embedder.timestep_embedder.linear_1.", "t_embedder.mlp.0.")
        key = key.replace("t_embedder.timestep_embedder.linear_2.", "t_embedder.mlp.2.")
        if ".qkv.to_q." in key:
            parts = [weights[key.replace("to_q", name)] for name in ("to_q", "to_k", "to_v")]
            out["decoder." + key.replace(".to_q.", ".")] = torch.cat(parts)
        elif ".qkv.to_" not in key:
            out["decoder." + key] = value
    for key in [k for k in out if k.startswith("decoder.diff_blocks.") and k.endswith(".attn.proj.weight")]:
        block, dim = key.removesuffix(".attn.proj.weight"), out[key].shape[0]
        for gate, target in (("gate_msa", "attn.proj"), ("gate_mlp", "mlp.w_down"), ("gate_ctx", "context_proj")):
            out[f"{block}.{gate}"] = torch.rand(dim, generator=gen) + 0.5
            for leaf in ("weight", "bias"):
                if f"{block}.{target}.{leaf}" in out:
                    value = out[f"{block}.{target}.{leaf}"]
                    out[f"{block}.{target}.{leaf}"] = value / out[f"{block}.{gate}"].reshape(
                        -1, *[1] * (value.ndim - 1)
                    )
    out["decoder.coarse_head.weight"] = torch.randn(48, 16, generator=gen)
    out["decoder.coarse_head.bias"] = torch.randn(48, generator=gen)
    return out


def write_decoder(path: Path, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """Writes the file; returns its tensors."""
    metadata = {"config": {"vae": VAE}}
    tensors = checkpoint_tensors(randomize(VideoDecoderConfigurator.from_metadata(metadata), gen), gen)
    save_file(
        {k: v.contiguous() for k, v in tensors.items()}, str(path), metadata={"config": json.dumps(metadata["config"])}
    )
    return tensors


def build_decoder(path: Path) -> torch.nn.Module:
    """As ltx-pipelines' `VideoDecoder` builds it: 1.2.0's sd ops for the file, `CHUNKED_EAGER`, float32, CPU."""
    decoder = SingleGPUModelBuilder(
        model_class_configurator=VideoDecoderConfigurator,
        model_path=str(path),
        model_sd_ops=video_decoder_sd_ops_for_checkpoint(str(path)),
        module_ops=(build_diffvae_mode_op(DiffVAEMode.CHUNKED_EAGER),),
        registry=ModelRegistry(cache_models=False, cache_weights=False),
    ).build(device=torch.device("cpu"), dtype=torch.float32)
    assert all(p.device.type == "cpu" for p in decoder.parameters()), "1.2.0 left parameters unloaded"
    return decoder.eval()


@contextmanager
def injected_noise(seed: int, drawn: list[tuple[int, ...]]) -> Iterator[None]:
    """`torch.randn` (the decoder's draw) returns `noise(shape, seed)`; the shapes asked for go to `drawn`."""

    def randn(*size: object, dtype: torch.dtype = torch.float32, **_: object) -> torch.Tensor:
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], tuple | list) else tuple(size)
        drawn.append(shape)
        return torch.from_numpy(noise(shape, seed)).to(dtype)

    with mock.patch.object(torch, "randn", randn):
        yield


def decode(decoder: torch.nn.Module, latent: torch.Tensor, seed: int) -> tuple[torch.Tensor, tuple[int, ...]]:
    drawn: list[tuple[int, ...]] = []
    with injected_noise(seed, drawn):
        video = decoder(latent, generator=torch.Generator().manual_seed(SEED))
    assert len(drawn) == 1, f"the decoder drew noise {len(drawn)} times: {drawn}"
    return video, drawn[0]


def tiling() -> TileSizeConfig:
    return TileSizeConfig(**{axis: DimensionSizeConfig(*sizes) for axis, sizes in TILING.items()})


def tiled_decode(
    decoder: torch.nn.Module, latent: torch.Tensor, seed: int
) -> tuple[torch.Tensor, list[tuple[int, ...]]]:
    """`tiled_decode` in TILING's tiles, its chunks joined; the noise shapes it drew."""
    drawn: list[tuple[int, ...]] = []
    with injected_noise(seed, drawn):
        chunks = list(decoder.tiled_decode(latent, tiling(), generator=torch.Generator().manual_seed(SEED)))
    return torch.cat(chunks, dim=2), drawn


def stages(decoder: torch.nn.Module, latent: torch.Tensor, x_t: torch.Tensor) -> dict[str, np.ndarray]:
    """The pieces `_decode_pixels` runs for an untiled decode, one by one."""
    work, _ = diffusion_tiling.ensure_min_latent_shape(latent, decoder.stage_min_tile_sizes)
    padded = diffusion_tiling.pad_trailing_latent_for_natten_border(work, decoder._natten_trailing_pad_latent_frames)
    x = decoder.conv_in(decoder.per_channel_statistics.un_normalize(padded).permute(0, 2, 3, 4, 1))
    out = {"stem": x}
    for i in range(3):
        x = out[f"stage_{i + 1}"] = decoder._run_det_stage(x, i, drop_leading_frame=True)
    deferred = decoder.forward_stage_4(x, drop_leading_frame=True, pad_trailing=True)  # what CHUNKED injects
    out["context"] = diffusion_tiling.crop_trailing_context_natten_pad(
        decoder._run_det_stage(x, 3, drop_leading_frame=True),
        n_latent_frames=decoder._natten_trailing_pad_latent_frames,
        time_scale=decoder.video_downscale_factors.time,
        stage5_kernel_t=decoder.stage5_kernel[0],
    )
    torch.testing.assert_close(decoder.upsamples[3](deferred), out["context"], rtol=1e-6, atol=1e-6)
    t = decoder.default_inference_timesteps[:1]
    out["step"] = decoder.forward_diff_step_deferred(decoder._x_for_diff_step(x_t), deferred, t)
    return {k: v.numpy() for k, v in out.items()}


def record_decoder(out: Path, gen: torch.Generator) -> None:
    path = out / "decoder.safetensors"
    tensors = write_decoder(path, gen)
    decoder = build_decoder(path)
    folded = tensors["decoder.diff_blocks.1.context_proj.weight"] * tensors["decoder.diff_blocks.1.gate_ctx"][:, None]
    assert torch.equal(decoder.diff_blocks[1].context_proj.weight, folded), "1.2.0 did not fold gate_ctx"
    latent, x0_latent = torch.randn(LATENT, generator=gen), torch.randn(X0_LATENT, generator=gen)
    with torch.no_grad():
        video, video_noise = decode(decoder, latent, NOISE_SEEDS["video"])
        recorded = stages(decoder, latent, torch.from_numpy(noise(video_noise, NOISE_SEEDS["video"])))
        tiled_video, tiled_draws = tiled_decode(decoder, latent, NOISE_SEEDS["video"])
        decoder.model_output_type, decoder.timestep_scale_multiplier = (
            X0["model_output_type"],
            X0["timestep_scale_multiplier"],
        )
        decoder.default_inference_timesteps = torch.ones(1)
        x0_video, x0_noise = decode(decoder, x0_latent, NOISE_SEEDS["x0_video"])
        _, x0_tiled_draws = tiled_decode(decoder, x0_latent, NOISE_SEEDS["x0_video"])
    np.savez_compressed(
        out / "decoder.npz", latent=latent.numpy(), video=video.numpy(), x0_latent=x0_latent.numpy(),
        x0_video=x0_video.numpy(), x0_config=json.dumps(X0), **recorded,
        video_noise_shape=np.array(video_noise), x0_noise_shape=np.array(x0_noise),
        video_noise_sum=noise(video_noise, NOISE_SEEDS["video"]).sum(dtype=np.float64),
        x0_noise_sum=noise(x0_noise, NOISE_SEEDS["x0_video"]).sum(dtype=np.float64),
        tiled_video=tiled_video.numpy(), tiling=json.dumps(TILING), tiled_noise_shapes=np.array(tiled_draws),
        x0_tiled_noise_shapes=np.array(x0_tiled_draws), recommended=json.dumps(recommended()),
    )  # fmt: skip
    sys.stdout.write(
        f"{path.name} ({path.stat().st_size} bytes), decoder.npz: video {tuple(video.shape)}, tiled video "
        f"{tuple(tiled_video.shape)} from {len(tiled_draws)} noise draw(s) {tiled_draws}; x0 in tiles: "
        f"{len(x0_tiled_draws)} draws\n"
    )


def recommended() -> list[dict[str, object]]:
    """RECOMMEND_CASES with upstream's answer: [[frames, overlap], [height, overlap], [width, overlap]] or None
    (it raised: nothing fits)."""
    out = []
    for decoder, (frames, height, width), free in RECOMMEND_CASES:
        geometry = diffvae_tiling_geometry_from_vae_config({"decoder": decoder})
        try:
            tiling = recommended_decode_tiling_config(
                **geometry, height=height, width=width, num_frames=frames, mode=DiffVAEMode.CHUNKED_EAGER,
                free_bytes=free, model_bytes=0,
            )  # fmt: skip
            sizes = [[d.tile_size, d.overlap] for d in (tiling.frames, tiling.height, tiling.width)]
        except ValueError:
            sizes = None
        out.append({"decoder": decoder, "video": [frames, height, width], "free_bytes": free, "tiling": sizes})
    return out


def record_attention(out: Path, gen: torch.Generator) -> None:
    arrays: dict[str, np.ndarray] = {}
    for i, (shape, kernel) in enumerate(NA_CASES):
        q, k, v = (torch.randn(shape, generator=gen) for _ in range(3))
        arrays |= {f"na{i}.q": q, f"na{i}.k": k, f"na{i}.v": v, f"na{i}.kernel": torch.tensor(kernel)}
        arrays[f"na{i}.out"] = na3d(q, k, v, kernel_size=list(kernel), scale=1.0)
    attn, norm = NeighborhoodAttention3D(32, (3, 3, 5), head_dim=16), torch.nn.RMSNorm(32, eps=1e-6)
    attn.attention_function, attn.w_chunks = EagerSdpaAttention(), 4
    weights = randomize(torch.nn.ModuleDict({"attn": attn, "norm": norm}), gen)
    torch.nn.ModuleDict({"attn": attn, "norm": norm}).load_state_dict(weights)
    arrays |= {f"chunked.{k}": v for k, v in weights.items()}
    for width in CHUNKED_WIDTHS:
        x, scale, shift = torch.randn(2, 3, 3, width, 32, generator=gen), *torch.randn(2, 2, 1, 1, 1, 32, generator=gen)
        arrays |= {f"chunked{width}.x": x.clone(), f"chunked{width}.scale": scale, f"chunked{width}.shift": shift}
        with torch.no_grad():
            arrays[f"chunked{width}.out"] = chunked(x, attn, norm, scale, shift)
    np.savez_compressed(out / "attention.npz", **{k: v.numpy() for k, v in arrays.items()})


def record(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    record_decoder(out, gen)
    record_attention(out, gen)


if __name__ == "__main__":
    recorder_command(__doc__.split("\n", 1)[0], record, FIXTURES)
