"""Peak device memory and wall time of the video VAE decoder, tiled and untiled, ltx-jax and ltx-core.

    python benchmarks/bench_vae_memory.py --out /tmp/vae_memory                 # LTX-2 19B decoder, 1024x1536x121
    python benchmarks/bench_vae_memory.py --config ltx2_3 --out /tmp/vae_memory  # LTX-2.3's decoder
    python benchmarks/bench_vae_memory.py --config tiny --pixels 64x64x9 --torch-on-cpu --out /tmp/v  # CPU smoke test

Builds the decoder from its checkpoint config (`CONFIGS`, sources there) with random bf16 weights
and decodes a random bf16 latent of (1, 128, 1 + (F - 1) / 8, H / 32, W / 32), each variant in a fresh
process so that the device's peak is its own (see docs/video_vae.md, "Memory"):

- `tiled_default`: `TileSizeConfig.default()` on `devices=[first device]`, as generate.py decodes a checkpoint.
- `tiled_small`: ltx-core 1.0.0's `TilingConfig(SpatialTilingConfig(768, 64), TemporalTilingConfig(80, 24))`
  (`TileSizeConfig.from_long_side`: 512 x 768 px tiles at 1024 x 1536); ltx-core runs it too, when torch
  sees CUDA (or with `--torch-on-cpu`), with its own random init: memory does not depend on the values.
- `untiled`: one jitted pass (it fit on an H200 at full size: 17.6 GiB, docs/video_vae.md).

A JAX variant runs in two processes sharing a persistent compilation cache: the first compiles (its
peak includes XLA's convolution autotuning), the second loads the executables, so its
`memory_stats()["peak_bytes_in_use"]` is decoding alone. ltx-core reports `torch.cuda.max_memory_allocated()`
of a decode after a warm-up one. Writes vae_memory.json and vae_memory.md under --out after every row.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULT_PREFIX = "RESULT_JSON "
CALL_KEYS = ("first_call_s", "second_call_s")
GIB = 1024**3


def _res(layers: int) -> list[Any]:
    return ["res_x", {"num_layers": layers, "inject_noise": False}]


_RESIDUAL_UP = ["compress_all", {"residual": True, "multiplier": 2}]
# Checkpoint `config["vae"]` dicts (ltx-core's configurator fills in the rest: 128 latent channels,
# patch 4, pixel norm, decoder_base_channels 128, non-causal decoding).
CONFIGS: dict[str, dict[str, Any]] = {
    # LTX-2 19B: diffusers' scripts/convert_ltx2_to_diffusers.py, get_ltx2_video_vae_config("2.0")
    # (decoder_block_out_channels 256/512/1024 = 128 base x the three x2 multipliers,
    # decoder_layers_per_block 5/5/5/5, upsample_residual, "spatiotemporal" x3, reflect padding),
    # the same as the `VAE_CONFIG` of Lightricks' ltx-core VAE test (timestep_conditioning true).
    "ltx2": {
        "timestep_conditioning": True,
        "decoder_blocks": [_res(5), _RESIDUAL_UP, _res(5), _RESIDUAL_UP, _res(5), _RESIDUAL_UP, _res(5)],
    },
    # LTX-2.3: the block list of third-party dumps of the 2.3 checkpoint's config (e.g. TensorRT-LLM's
    # visual_gen LTX-2 VAE test), as diffusers' get_ltx2_video_vae_config("2.3") describes it (layers
    # 4/6/4/2/2, zero padding, no residual; from the bottleneck: all x2, all x1, time x2, space x2).
    "ltx2_3": {
        "spatial_padding_mode": "zeros",
        "timestep_conditioning": False,
        "decoder_blocks": [
            ["res_x", {"num_layers": 4}],
            ["compress_space", {"multiplier": 2}],
            ["res_x", {"num_layers": 6}],
            ["compress_time", {"multiplier": 2}],
            ["res_x", {"num_layers": 4}],
            ["compress_all", {"multiplier": 1}],
            ["res_x", {"num_layers": 2}],
            ["compress_all", {"multiplier": 2}],
            ["res_x", {"num_layers": 2}],
        ],
    },
    # The 19B recipe with 8 latent / base channels and one res_x block (compiles fast): CPU smoke tests.
    "tiny": {
        "latent_channels": 8,
        "decoder_base_channels": 8,
        "timestep_conditioning": True,
        "decoder_blocks": [_res(1), _RESIDUAL_UP, _RESIDUAL_UP, _RESIDUAL_UP],
    },
}
JAX_VARIANTS = ("tiled_default", "tiled_small", "untiled")
TORCH_VARIANTS = ("tiled_small",)


def parse_pixels(text: str) -> tuple[int, int, int]:
    """Parses --pixels "HxWxF" into (height, width, frames), checked against the VAE's 32 x 32 x 8 compression."""
    try:
        height, width, frames = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--pixels {text!r} must be HxWxF, e.g. 1024x1536x121.") from None
    if height % 32 or width % 32 or frames < 1 or (frames - 1) % 8:
        raise argparse.ArgumentTypeError(
            f"--pixels {text!r}: height and width must be multiples of 32 and frames 1 + 8k (e.g. 1024x1536x121)."
        )
    return height, width, frames


def latent_shape(config: dict[str, Any], pixels: tuple[int, int, int]) -> tuple[int, ...]:
    """(1, C, 1 + (F - 1) / 8, H / 32, W / 32): 32 x 32 spatial and 8x causal temporal compression."""
    height, width, frames = pixels
    return (1, config.get("latent_channels", 128), (frames - 1) // 8 + 1, height // 32, width // 32)


def jax_tiling(variant: str, pixels: tuple[int, int, int]) -> Any:  # noqa: ANN401 - TileSizeConfig | None
    from ltx_jax.model.video_vae import (  # noqa: PLC0415 - the parent process stays free of JAX
        DimensionSizeConfig,
        SpatioTemporalScaleFactors,
        TileSizeConfig,
    )

    if variant == "untiled":
        return None
    if variant == "tiled_default":
        return TileSizeConfig.default()
    return TileSizeConfig.from_long_side(
        long_side=DimensionSizeConfig(768, 64),
        height=pixels[0],
        width=pixels[1],
        scale_factors=SpatioTemporalScaleFactors(8, 32, 32),
        frames=DimensionSizeConfig(80, 24),
    )


def _tile_summary(tile_shapes: list[tuple[int, ...]]) -> dict[str, Any]:
    largest = max(tile_shapes, key=lambda s: s[0] * s[1] * s[2])
    return {"tiles": len(tile_shapes), "largest_tile_latent": list(largest)}


def _timed(call: Any, sync: Any) -> tuple[Any, float]:  # noqa: ANN401 - any callable / result
    start = time.perf_counter()
    out = call()
    sync(out)
    return out, time.perf_counter() - start


def random_decoder(config: dict[str, Any], seed: int) -> Any:  # noqa: ANN401 - a VideoDecoder
    """The decoder with random bf16 weights drawn on the host: eager nnx init compiles one XLA program
    per parameter shape, which takes minutes on a slow CPU. Fan-in scaling keeps activations O(1)."""
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    from flax import nnx  # noqa: PLC0415

    from ltx_jax.model.video_vae import video_decoder_from_config  # noqa: PLC0415

    build = lambda: video_decoder_from_config({"vae": config}, rngs=nnx.Rngs(0), param_dtype=jnp.bfloat16)  # noqa: E731
    graphdef, abstract = nnx.split(nnx.eval_shape(build))
    rng = np.random.default_rng(seed)

    def draw(leaf: jax.ShapeDtypeStruct) -> jax.Array:
        scale = 1.0 / np.sqrt(max(1, int(np.prod(leaf.shape[1:]))))
        return jnp.asarray(rng.standard_normal(leaf.shape, np.float32) * scale, leaf.dtype)

    return nnx.merge(graphdef, jax.tree.map(draw, abstract))


def _jax_decode(decoder: Any, latent: Any, key: Any, tiling: Any, device: Any) -> tuple[Any, list[tuple[int, ...]]]:  # noqa: ANN401
    """(decode(): the video, the tiles' latent shapes): `decode_video` in tiles on `[device]` as
    generate.py does, or one jitted pass when `tiling` is None."""
    import jax  # noqa: PLC0415
    from flax import nnx  # noqa: PLC0415

    from ltx_jax.model.video_vae import decode_video  # noqa: PLC0415

    if tiling is None:
        graphdef, state = nnx.split(decoder)
        one_pass = jax.jit(lambda state, latent, key: nnx.merge(graphdef, state)(latent, key=key))
        return lambda: one_pass(state, latent, key), [latent.shape[2:]]
    tiles = tiling.tiles(latent.shape[2:], decoder.video_downscale_factors)
    shapes = [tuple(s.stop - s.start for s in t.in_coords) for t in tiles]
    return lambda: decode_video(decoder, latent, tiling, key=key, devices=[device]), shapes


def _error(error: Exception) -> str:
    return f"{type(error).__name__}: {str(error).strip().splitlines()[0][:300]}"


def run_jax(
    config: dict[str, Any], pixels: tuple[int, int, int], variant: str, cache_dir: str, calls: int = 2
) -> dict[str, Any]:
    """One JAX variant in this (fresh) process: build, decode `calls` times, read the device's peak.

    `cache_dir`: the persistent compilation cache shared by the processes ("" leaves it off).
    """
    import jax  # noqa: PLC0415
    import jax.numpy as jnp  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415
    from flax import nnx  # noqa: PLC0415

    if cache_dir:
        jax.config.update("jax_compilation_cache_dir", cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    device = jax.devices()[0]
    decoder = random_decoder(config, seed=0)
    params = jax.tree.leaves(nnx.state(decoder, nnx.Param))
    shape = latent_shape(config, pixels)
    latent = jnp.asarray(np.random.default_rng(1).standard_normal(shape, np.float32), jnp.bfloat16)
    key = jax.random.key(2) if decoder.timestep_conditioning else None
    decode, tile_shapes = _jax_decode(decoder, latent, key, jax_tiling(variant, pixels), device)
    result: dict[str, Any] = {
        "framework": "jax",
        "jax": jax.__version__,
        "device": device.device_kind,
        "params": sum(p.size for p in params),
        "param_bytes": sum(p.nbytes for p in params),
        "latent": list(shape),
        **_tile_summary(tile_shapes),
    }
    try:
        for call in range(calls):
            video, result[CALL_KEYS[call]] = _timed(decode, jax.block_until_ready)
        result["output"], result["finite"] = list(video.shape), bool(jnp.isfinite(video).all())
    except Exception as error:  # noqa: BLE001 - an OOM is a result here, reported with the peak so far
        result["error"] = _error(error)
    stats = device.memory_stats() or {}  # None on CPU
    result["peak_bytes"], result["bytes_limit"] = stats.get("peak_bytes_in_use"), stats.get("bytes_limit")
    return result


def torch_tiling() -> Any:  # noqa: ANN401 - ltx-core's TilingConfig
    """`tiled_small` for ltx-core 1.0.0: 768-px long side overlapping by 64, 80 frames overlapping by 24."""
    from ltx_core.model.video_vae.tiling import (  # noqa: PLC0415
        SpatialTilingConfig,
        TemporalTilingConfig,
        TilingConfig,
    )

    return TilingConfig(SpatialTilingConfig(768, 64), TemporalTilingConfig(80, 24))


def _torch_decoder(config: dict[str, Any], device: str) -> Any:  # noqa: ANN401 - ltx-core's VideoDecoder
    import torch  # noqa: PLC0415

    # Only the video VAE package: ltx-core's audio_vae imports torchaudio at import time.
    from ltx_core.model.video_vae.model_configurator import VideoDecoderConfigurator  # noqa: PLC0415

    with torch.device(device):
        decoder = VideoDecoderConfigurator.from_config({"vae": config}).to(torch.bfloat16).eval()
    with torch.no_grad():  # 1.0.0 leaves the statistics and the AdaLN table uninitialized (torch.empty)
        for name, tensor in decoder.state_dict(keep_vars=True).items():
            if name.endswith("std-of-means"):
                tensor.fill_(1.0)
            elif name.endswith("mean-of-means") or "scale_shift_table" in name:
                tensor.zero_()
    return decoder


def run_torch(config: dict[str, Any], pixels: tuple[int, int, int], on_cpu: bool, calls: int = 2) -> dict[str, Any]:
    """ltx-core 1.0.0's tiled decode with the `tiled_small` geometry, bf16, on CUDA (or CPU): `calls`
    decodes, the peak of the last (the first one's too)."""
    import torch  # noqa: PLC0415

    device = "cpu" if on_cpu else "cuda"
    cuda = device == "cuda"
    decoder = _torch_decoder(config, device)
    shape = latent_shape(config, pixels)
    generator = torch.Generator(device).manual_seed(1)
    latent = torch.randn(shape, generator=generator, device=device, dtype=torch.bfloat16)
    tiling = torch_tiling()
    tiles = decoder._prepare_tiles(latent, tiling)
    result: dict[str, Any] = {
        "framework": "ltx-core",
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if cuda else platform.processor() or "cpu",
        "params": sum(p.numel() for p in decoder.parameters()) + sum(b.numel() for b in decoder.buffers()),
        "latent": list(shape),
        **_tile_summary([tuple(s.stop - s.start for s in t.in_coords[2:]) for t in tiles]),
    }

    def decode() -> torch.Tensor:
        with torch.inference_mode():
            return torch.cat(list(decoder.tiled_decode(latent, tiling, generator=generator)), dim=2)

    def sync(_: torch.Tensor) -> None:
        if cuda:
            torch.cuda.synchronize()

    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    video = None
    try:
        for call in range(calls):
            if call:  # the last call's peak, without the first call's one-off allocations
                result["peak_bytes_first_call"] = torch.cuda.max_memory_allocated() if cuda else None
                video = None
                if cuda:
                    torch.cuda.reset_peak_memory_stats()
            video, result[CALL_KEYS[call]] = _timed(decode, sync)
        result["output"], result["finite"] = list(video.shape), bool(torch.isfinite(video).all())
    except Exception as error:  # noqa: BLE001 - an OOM is a result here
        result["error"] = _error(error)
    result["peak_bytes"] = torch.cuda.max_memory_allocated() if cuda else None
    result["peak_reserved_bytes"] = torch.cuda.max_memory_reserved() if cuda else None
    return result


def spawn(args: argparse.Namespace, framework: str, variant: str, cache_dir: str) -> dict[str, Any]:
    """Runs one measurement in a fresh Python process; its result, or why there is none."""
    command = [sys.executable, __file__, "--child", framework, variant, "--config", args.config]
    command += ["--pixels", "x".join(map(str, args.pixels)), "--cache-dir", cache_dir]
    command += ["--torch-on-cpu"] if args.torch_on_cpu else []
    env = dict(os.environ)
    # Allocate on demand, up to nearly the whole card, so that "out of memory" means the card's memory.
    env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    env.setdefault("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.95")
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout, env=env, check=False)
    except subprocess.TimeoutExpired:
        return {"framework": framework, "error": f"timed out after {args.timeout} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    if not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"framework": framework, "error": f"process exited {done.returncode}: {' | '.join(tail)[-500:]}"}
    result = json.loads(lines[-1].removeprefix(RESULT_PREFIX))
    result["process_s"] = round(time.perf_counter() - start, 1)
    return result


def _cell(value: Any, unit: str) -> str:  # noqa: ANN401 - bytes or seconds
    if value is None:
        return "n/a" if unit == "GiB" else "-"
    return f"{value / GIB:.1f}" if unit == "GiB" else f"{value:.2f}"


def table(rows: list[dict[str, Any]]) -> str:
    """The markdown table: one line per (framework, variant); JAX's first call compiles."""
    lines = [
        "| framework | variant | tiles | largest tile (latent F'xH'xW') | peak GiB | peak GiB, compiling run "
        "| first call s | second call s | output | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        measured, first = row["measured"], row.get("compiling", row["measured"])
        note = measured.get("error") or ("" if measured.get("finite", True) else "non-finite output")
        compiling = _cell(first.get("peak_bytes"), "GiB") if "compiling" in row else "-"
        cells = [
            row["framework"],
            row["variant"],
            str(measured.get("tiles", "-")),
            "x".join(map(str, measured.get("largest_tile_latent", []))),
            _cell(measured.get("peak_bytes"), "GiB"),
            compiling,
            _cell(first.get("first_call_s"), "s"),
            _cell(measured.get("second_call_s"), "s"),
            "x".join(map(str, measured.get("output", []))) or "-",
            note,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def torch_available(on_cpu: bool) -> bool:
    """torch (with CUDA unless `on_cpu`) and ltx-core importable, checked in a throwaway process:
    initialising CUDA here would hold device memory during the JAX measurements."""
    probe = f"import torch, ltx_core.model.video_vae.tiling; assert {on_cpu} or torch.cuda.is_available()"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, check=False).returncode == 0


def write_report(args: argparse.Namespace, rows: list[dict[str, Any]]) -> str:
    """Writes vae_memory.{json,md} under --out (after every row: a killed run keeps what it measured)."""
    config, (height, width, frames) = CONFIGS[args.config], args.pixels
    first = next((row["measured"] for row in rows if "params" in row["measured"]), {})
    versions = {k: row["measured"][k] for row in rows for k in ("jax", "torch") if k in row["measured"]}
    header = (
        f"`python benchmarks/bench_vae_memory.py --config {args.config} --pixels {height}x{width}x{frames}`: "
        f"{args.config} decoder ({first.get('params')} parameters, bf16), latent {latent_shape(config, args.pixels)}, "
        f"{first.get('device', '?')} ({', '.join(f'{k} {v}' for k, v in versions.items())})."
    )
    markdown = f"{header}\n\n{table(rows)}\n"
    report = {"config": args.config, "vae": config, "pixels": list(args.pixels), "params": first.get("params")}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "vae_memory.json").write_text(json.dumps({**report, "rows": rows}, indent=1))
    (args.out / "vae_memory.md").write_text(markdown)
    return markdown


def run_all(args: argparse.Namespace) -> list[dict[str, Any]]:
    """JAX's tiled variants, ltx-core's, then untiled (last: on a smaller GPU it may run out of memory)."""
    with_torch = torch_available(args.torch_on_cpu)
    if not with_torch:
        print("ltx-core row skipped: it needs torch with CUDA (or --torch-on-cpu) and ltx-core.", flush=True)
    jobs = [("jax", v) for v in args.variants if v != "untiled"] + [("torch", v) for v in TORCH_VARIANTS if with_torch]
    jobs += [("jax", "untiled")] if "untiled" in args.variants else []
    rows = []
    with tempfile.TemporaryDirectory() as cache_dir:
        for framework, variant in jobs:
            print(f"{framework} {variant} ...", flush=True)
            row = {"framework": "ltx-core" if framework == "torch" else "jax", "variant": variant}
            if framework == "jax":
                # The second process finds every executable in the cache: its peak is decoding alone.
                row["compiling"] = spawn(args, framework, variant, cache_dir)
            failed = "error" in row.get("compiling", {})
            row["measured"] = row["compiling"] if failed else spawn(args, framework, variant, cache_dir)
            rows.append(row)
            print(json.dumps(row), flush=True)
            write_report(args, rows)
    return rows


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=sorted(CONFIGS), default="ltx2")
    parser.add_argument("--pixels", type=parse_pixels, default=(1024, 1536, 121), help="HxWxF (default 1024x1536x121)")
    parser.add_argument("--variants", nargs="+", choices=JAX_VARIANTS, default=list(JAX_VARIANTS))
    parser.add_argument("--torch-on-cpu", action="store_true", help="run the ltx-core row on CPU (no peak)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per measurement process")
    parser.add_argument("--out", type=Path, default=Path("vae_memory"), help="folder for vae_memory.{json,md}")
    parser.add_argument("--child", nargs=2, metavar=("FRAMEWORK", "VARIANT"), help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", default="", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    config = CONFIGS[args.config]
    if args.child:
        framework, variant = args.child
        if framework == "jax":
            result = run_jax(config, args.pixels, variant, args.cache_dir)
        else:
            result = run_torch(config, args.pixels, args.torch_on_cpu)
        print(RESULT_PREFIX + json.dumps(result), flush=True)
        return
    height, width, frames = args.pixels
    print(f"{args.config} decoder, {width}x{height} px x {frames} frames, latent {latent_shape(config, args.pixels)}")
    rows = run_all(args)
    params = next((row["measured"]["params"] for row in rows if "params" in row["measured"]), None)
    print(f"decoder parameters: {params}")
    print(write_report(args, rows))


if __name__ == "__main__":
    main()
