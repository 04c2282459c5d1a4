"""LTX-2.5's diffusion video decoder, ltx-jax against ltx-core 1.2.0: the same file, latent, noise and tiles.

    python benchmarks/bench_diffusion_decode.py all [--tiny] [--dtype float32] [--tiling auto|none|F/O,H/O,W/O]
        [--jax-python PY] [--core-python PY] [--core-pythonpath P] [--repeats 3] [--work DIR]

Measures per implementation, each in its own process (other PYTHONPATHs): load time, the first decode (compiling:
XLA, or ltx-core's Triton kernels from an empty cache), the median of --repeats warm decodes (fewer past --budget
s), peak device memory (jax `peak_bytes_in_use`, torch `max_memory_allocated`; n/a on a CPU); then max|a - b| /
max|b| of the videos (b: ltx-core), and the same over the decoded change max|b - x_T| (the video is the noise x_T
plus two Euler steps, small with random weights: the first ratio alone says little).

Each decodes as its pipeline does: weights and latent in --dtype (bf16 is both pipelines' default), stages 1-3 whole,
stages 4-5 per tile, one device, the stage-5 noise drawn once for the whole video. The noise is shared: a float32
draw from --seed (numpy) rounded to the dtype on the host and put on the device before timing; it answers ltx-core's
one `torch.randn` and is ltx-jax's `tiled_decode(noise=)` (the pipelines draw it on the device: milliseconds).
Timed: the decode's chunks on the device (ltx-core `tiled_decode`; ltx-jax `tiled_decode`, which
`DiffusionVideoDecoding` calls); the pipelines' last elementwise pass (to uint8 or [0, 1]) is left out of both.

--tiling auto (default at full size) is ltx-pipelines' AUTO_TILING (`tiling_config_for_vae`: CHUNKED_EAGER's
`recommended_decode_tiling_config` from free CUDA memory before loading), resolved in the ltx-core process and given
to ltx-jax; `none` is one tile. ltx-core's CHUNKED_EAGER attention is NATTEN, else Triton, else eager SDPA, which on a
GPU is refused (no fair comparison) unless --allow-eager. Inputs (`all` writes them under --work): a
CausalDiffusionVAE file from scripts/synthetic_ltx25.py's writer (class defaults, random bf16 weights; --tiny: its
tiny config, 16 latent channels) and an N(0, 1) latent (1, C, 1 + (F - 1) / 8, H / 32, W / 32). `run --impl` times
one implementation into --out (result.json, video.npy); `compare` prints a --work folder's table again.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

REPO = Path(__file__).resolve().parents[1]
IMPLS = ("ltx-core", "ltx-jax")  # ltx-core first: with --tiling auto it resolves the tiles ltx-jax then gets
SIZES = {False: (1024, 1536, 121), True: (96, 96, 17)}  # (height, width, frames)
TINY_TILING = "16/8,64/32,64/32"  # 2 x 2 x 2 tiles of the tiny decoder, at its least overlaps (8 frames, 32 px)
CHANNELS = {False: 128, True: 16}
NOISE_CHUNK, GIB = 1 << 24, 1 << 30


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not the usage block
        sys.exit(f"{self.prog}: error: {message}")


def fail(message: str) -> None:
    sys.exit(f"bench_diffusion_decode: {message}")


def parse_tiling(text: str) -> list[tuple[int, int]] | None:
    """`auto` -> None; `none` -> three untiled axes; `F/O,H/O,W/O` -> (tile size, overlap) per axis."""
    if text in ("auto", "none"):
        return None if text == "auto" else [(0, 0)] * 3
    try:
        axes = [tuple(int(v) for v in axis.split("/")) for axis in text.split(",")]
    except ValueError:
        axes = []
    if len(axes) != 3 or any(len(a) != 2 or min(a) < 0 for a in axes):
        fail(f"--tiling={text}: give auto, none or FRAMES/OVERLAP,HEIGHT/OVERLAP,WIDTH/OVERLAP (e.g. {TINY_TILING})")
    return axes


def tiling_text(tiling: Any) -> str:
    return ",".join(f"{d.tile_size}/{d.overlap}" for d in (tiling.frames, tiling.height, tiling.width))


def noise_chunks(shape: tuple[int, ...], seed: int) -> Iterator[np.ndarray]:
    """The float32 N(0, 1) noise of `shape` from `seed`, flattened, in chunks (the same values as one draw)."""
    rng, total = np.random.default_rng(seed), int(np.prod(shape))
    for start in range(0, total, NOISE_CHUNK):
        yield rng.standard_normal(min(NOISE_CHUNK, total - start), dtype=np.float32)


def time_calls(call: Callable[[], Any], sync: Callable[[Any], None], args: argparse.Namespace) -> dict[str, Any]:
    """The first call, then up to --repeats warm ones (at least one; none started past --budget s)."""
    start = time.perf_counter()
    out = call()
    sync(out)
    first, warm = time.perf_counter() - start, []
    while len(warm) < args.repeats and (not warm or time.perf_counter() - start + warm[-1] <= args.budget):
        out = None  # the last video is not kept alive through the next decode (a pipeline would not keep it)
        t = time.perf_counter()
        out = call()
        sync(out)
        warm.append(time.perf_counter() - t)
    return {"first_s": first, "warm_s": warm, "out": out}


def finish(args: argparse.Namespace, result: dict[str, Any], video: np.ndarray) -> dict[str, Any]:
    """video.npy in the run's dtype (bf16 as its 16 bits: numpy has no bfloat16), and the result."""
    np.save(args.out / "video.npy", video.view(np.uint16) if args.dtype == "bfloat16" else video)
    return result | {"video_shape": list(video.shape), "status": "ok"}


def write_result(out_dir: Path, result: dict[str, Any]) -> None:
    (out_dir / "result.json").write_text(json.dumps(result, indent=1) + "\n")


def run_ltx_jax(args: argparse.Namespace, latent_np: np.ndarray, result: dict[str, Any]) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from ltx_jax.model.video_vae import load_diffusion_video_decoder
    from ltx_jax.model.video_vae.diffusion_tiled_decode import TiledLayout, tiled_decode
    from ltx_jax.model.video_vae.tiling import DimensionSizeConfig, TileSizeConfig
    from ltx_jax.pipeline.decoders import DiffusionVideoDecoding

    device, dtype = jax.devices()[0], jnp.dtype(args.dtype)
    start = time.perf_counter()
    decoder = load_diffusion_video_decoder(args.file, param_dtype=dtype)
    jax.block_until_ready(nnx.state(decoder))
    result["load_s"] = time.perf_counter() - start
    axes = parse_tiling(args.tiling)
    given = None if axes is None else TileSizeConfig(*(DimensionSizeConfig(*a) for a in axes))
    # as the pipeline: the tiles checked, or (auto) ltx-jax's port of the rule from jax's free memory
    tiling = DiffusionVideoDecoding(decoder, [device], given).tiling_for(latent_np.shape)
    layout = TiledLayout.of(decoder, latent_np.shape, tiling)
    result |= {
        "tiling": tiling_text(tiling), "tiles": sum(len(t) for _, t in layout.groups), "noise_shape": layout.video,
        "attention": "ltx-jax neighborhood_attention", "version": f"jax {jax.__version__}", "device": str(device),
        "tiling_from": "given" if given else "AUTO_TILING: ltx-jax's port of the rule, from jax's free memory",
    }  # fmt: skip
    write_result(args.out, result)
    latent = jax.device_put(latent_np.astype(dtype), device)
    noise = np.concatenate([c.astype(dtype) for c in noise_chunks(layout.video, args.seed)]).reshape(layout.video)
    noise = jax.device_put(noise, device)  # rounded on the host: a float32 copy on the device would count in its peak
    call = lambda: list(tiled_decode(decoder, latent, tiling, noise=noise, devices=[device]))  # noqa: E731
    timed = time_calls(call, jax.block_until_ready, args)
    result["peak_bytes"] = (device.memory_stats() or {}).get("peak_bytes_in_use")
    video = np.concatenate([np.asarray(c) for c in timed.pop("out")], axis=2)
    return finish(args, result | timed, video)


def core_tiling(args: argparse.Namespace, latent_shape: tuple[int, ...], torch: Any) -> tuple[Any, str]:
    """ltx-core's TileSizeConfig for --tiling, and where it came from; auto as ltx-pipelines' `tiling_config_for_vae`
    resolves it."""
    from ltx_core.devices import cuda_activation_budget_bytes
    from ltx_core.model.video_vae.diffusion_tiling import recommended_decode_tiling_config
    from ltx_core.model.video_vae.model_configurator import (
        diffvae_tiling_geometry_from_vae_config,
        estimate_diffusion_decoder_weight_bytes,
    )
    from ltx_core.model.video_vae.transformer import DiffVAEMode
    from ltx_core.tiling import DimensionSizeConfig, TileSizeConfig
    from safetensors import safe_open

    axes = parse_tiling(args.tiling)
    if axes is not None:
        return TileSizeConfig(*(DimensionSizeConfig(*a) for a in axes)), "given"
    if not torch.cuda.is_available():
        fail("--tiling auto sizes tiles from free CUDA memory (upstream's rule), and torch sees no GPU: pass --tiling")
    with safe_open(args.file, "np") as f:
        vae = json.loads(f.metadata()["config"])["vae"]
    _, _, t, h, w = latent_shape
    free = cuda_activation_budget_bytes(torch.device("cuda"))
    tiling = recommended_decode_tiling_config(
        **diffvae_tiling_geometry_from_vae_config(vae), height=h * 32, width=w * 32, num_frames=(t - 1) * 8 + 1,
        mode=DiffVAEMode.CHUNKED_EAGER, free_bytes=free, model_bytes=estimate_diffusion_decoder_weight_bytes(args.file),
    )  # fmt: skip
    return tiling, f"AUTO_TILING: upstream's rule at {free / GIB:.1f} GiB free"


def core_decoder(path: str, device: Any, dtype: Any) -> Any:
    """As ltx-pipelines' `VideoDecoder` builds a diffusion VAE's decoder (CHUNKED_EAGER, no torch.compile)."""
    from ltx_core.loader.registry import ModelRegistry
    from ltx_core.loader.single_gpu_model_builder import SingleGPUModelBuilder
    from ltx_core.model.video_vae.model_configurator import (
        VideoDecoderConfigurator,
        video_decoder_sd_ops_for_checkpoint,
    )
    from ltx_core.model.video_vae.transformer import DiffVAEMode, build_diffvae_mode_op

    return SingleGPUModelBuilder(
        model_path=path, model_class_configurator=VideoDecoderConfigurator,
        model_sd_ops=video_decoder_sd_ops_for_checkpoint(path, diffusion_vae=True, na_dsl_kernel=False),
        registry=ModelRegistry(cache_models=False, cache_weights=False),
        module_ops=(build_diffvae_mode_op(DiffVAEMode.CHUNKED_EAGER),),
    ).build(device=device, dtype=dtype).eval()  # fmt: skip


def core_noise(decoder: Any, latent_shape: tuple[int, ...], seed: int, dtype: Any, torch: Any) -> Any:
    """The whole-video noise `_decode_pixels` draws (the latent floored to `stage_min_tile_sizes`, upscaled), from
    `noise_chunks`, rounded to `dtype` on the host (to nearest even, as ml_dtypes rounds for ltx-jax)."""
    b, _, t, h, w = (max(n, f) for n, f in zip(latent_shape, (0, 0, *decoder.stage_min_tile_sizes), strict=True))
    shape = (b, decoder.out_channels, (t - 1) * 8 + 1, h * 32, w * 32)
    noise, offset = torch.empty(int(np.prod(shape)), dtype=dtype), 0
    for chunk in noise_chunks(shape, seed):
        noise[offset : offset + chunk.size].copy_(torch.from_numpy(chunk))
        offset += chunk.size
    return noise.reshape(shape)


def run_ltx_core(args: argparse.Namespace, latent_np: np.ndarray, result: dict[str, Any]) -> dict[str, Any]:
    import importlib.metadata

    import torch
    from ltx_core.model.video_vae.transformer import NeighborhoodAttention3D

    cuda = torch.cuda.is_available()
    device, dtype = torch.device("cuda" if cuda else "cpu"), getattr(torch, args.dtype)
    sync = torch.cuda.synchronize if cuda else lambda: None
    tiling, source = core_tiling(args, latent_np.shape, torch)
    result |= {"tiling": tiling_text(tiling), "tiling_from": source}
    write_result(args.out, result)  # the tiles for ltx-jax, even if this run fails later
    start = time.perf_counter()
    decoder = core_decoder(str(args.file), device, dtype)
    sync()
    result["load_s"] = time.perf_counter() - start
    attentions = (m.attention_function for m in decoder.modules() if isinstance(m, NeighborhoodAttention3D))
    result["attention"] = ",".join(sorted({type(a).__name__ for a in attentions}))
    if cuda and "EagerSdpaAttention" in result["attention"] and not args.allow_eager:
        fail(f"ltx-core fell back to eager SDPA attention on the GPU ({result['attention']}): see the log for why")
    result["version"] = f"ltx-core {importlib.metadata.version('ltx-core')}, torch {torch.__version__}"
    result["device"] = torch.cuda.get_device_name() if cuda else "cpu"
    latent = torch.from_numpy(latent_np).to(device=device, dtype=dtype)
    host_noise = core_noise(decoder, latent_np.shape, args.seed, dtype, torch)
    noise = host_noise.to(device)  # no float32 copy on the device for a checksum: it would count in the peak
    result["noise_shape"] = list(noise.shape)

    def randn(*size: Any, **_: Any) -> Any:  # the decoder's one draw: the whole video's noise
        asked = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        if tuple(asked) != tuple(noise.shape):
            raise RuntimeError(f"ltx-core drew noise of {tuple(asked)}, not the video's {tuple(noise.shape)}")
        return noise

    def call() -> list[Any]:
        with mock.patch.object(torch, "randn", randn), torch.inference_mode():
            return list(decoder.tiled_decode(latent, tiling, torch.Generator(device=device).manual_seed(args.seed)))

    timed = time_calls(call, lambda _: sync(), args)
    result["peak_bytes"] = torch.cuda.max_memory_allocated() if cuda else None
    if cuda and not torch.equal(noise.cpu(), host_noise):
        fail("ltx-core wrote into the shared noise: its later calls decoded other noise")
    video = torch.cat([c.cpu() for c in timed.pop("out")], dim=2)
    video = (video.view(torch.int16) if dtype == torch.bfloat16 else video).numpy()
    return finish(args, result | timed, video)


def run(args: argparse.Namespace) -> None:
    """One implementation (`run --impl`): result.json and video.npy under --out."""
    args.out.mkdir(parents=True, exist_ok=True)
    # ltx-core's first call compiles its Triton kernels from an empty cache, as XLA compiles from none
    os.environ.setdefault("TRITON_CACHE_DIR", str(args.out / "triton_cache"))
    latent = np.load(args.latent)
    result = {"impl": args.impl, "dtype": args.dtype, "status": "running", "latent_shape": list(latent.shape)}
    result = (run_ltx_jax if args.impl == "ltx-jax" else run_ltx_core)(args, latent, result)
    write_result(args.out, result)
    warm = result["warm_s"]
    print(f"{args.impl}: first {result['first_s']:.2f} s, warm median {statistics.median(warm):.2f} s of {len(warm)}")


def write_inputs(args: argparse.Namespace) -> tuple[Path, Path]:
    """The decoder file (once per --work and size class) and the latent for --height/--width/--frames."""
    args.work.mkdir(parents=True, exist_ok=True)
    path = args.work / ("decoder-tiny.safetensors" if args.tiny else "ltx-2.5-video-vae-decoder-bf16.safetensors")
    channels = CHANNELS[args.tiny]
    if not path.exists():
        sys.path.insert(0, str(REPO / "scripts"))
        import synthetic_ltx25  # make_synthetic_checkpoint.py --model 2.5's writer (it imports ltx-core 1.0.0)
        from synthetic_files import Planned, write_safetensors

        vae = synthetic_ltx25.diffusion_vae_config({"latent_channels": channels, "encoder_blocks": []}, tiny=args.tiny)
        tensors = synthetic_ltx25.plan_diffusion_decoder(vae) | {
            "per_channel_statistics.std-of-means": Planned((channels,), "ones"),
            "per_channel_statistics.mean-of-means": Planned((channels,), "zeros"),
        }
        metadata = {"config": json.dumps({"vae": vae}), "model_version": synthetic_ltx25.MODEL_VERSION}
        write_safetensors(path, tensors, metadata, args.seed, workers=4)
    shape = (1, channels, 1 + (args.frames - 1) // 8, args.height // 32, args.width // 32)
    latent = args.work / f"latent-{'x'.join(map(str, shape))}.npy"
    np.save(latent, np.random.default_rng(args.seed + 1).standard_normal(shape, dtype=np.float32))
    return path, latent


def launch(args: argparse.Namespace, impl: str, decoder: Path, latent: Path, tiling: str) -> dict[str, Any]:
    """`run --impl impl` in its own process (its interpreter and PYTHONPATH), its output in IMPL/log.txt; its
    result (status "failed ..." where it did not finish)."""
    out = args.work / impl
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").unlink(missing_ok=True)
    side = "jax" if impl == "ltx-jax" else "core"
    python, path = getattr(args, f"{side}_python"), getattr(args, f"{side}_pythonpath")
    command = [python, __file__, "run", "--impl", impl, "--file", str(decoder), "--latent", str(latent), "--out",
               str(out), "--dtype", args.dtype, "--tiling", tiling, "--repeats", str(args.repeats), "--budget",
               str(args.budget), "--seed", str(args.seed), *(["--allow-eager"] * args.allow_eager)]  # fmt: skip
    print(f"== {impl}: {' '.join(command)}", flush=True)
    with open(out / "log.txt", "w") as log:
        try:
            env = os.environ | ({"PYTHONPATH": path} if path is not None else {})
            code = subprocess.run(command, stdout=log, stderr=log, env=env, timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            code = f"killed after --timeout={args.timeout} s"
    result = json.loads((out / "result.json").read_text()) if (out / "result.json").exists() else {}
    if code != 0 or result.get("status") != "ok":
        tail = "".join((out / "log.txt").read_text(errors="replace").splitlines(keepends=True)[-15:])
        print(f"{impl} failed ({code}); the end of {out / 'log.txt'}:\n{tail}", flush=True)
        result["status"] = f"failed ({code}; {out / 'log.txt'})"
        write_result(out, result)
    return result


def agreement(work: Path, results: dict[str, dict[str, Any]], seed: int) -> str:
    """max|a - b| / max|b|, and over the decoded change (x_T: the shared noise rounded to the dtype)."""
    import ml_dtypes

    dtype = ml_dtypes.bfloat16 if results["ltx-core"]["dtype"] == "bfloat16" else np.float32
    a, b = (np.load(work / i / "video.npy", mmap_mode="r").view(dtype) for i in ("ltx-jax", "ltx-core"))
    if a.shape != b.shape:
        return f"the videos differ in shape: ltx-jax {a.shape}, ltx-core {b.shape}"
    shape = tuple(results["ltx-core"]["noise_shape"])
    noise = np.concatenate(list(noise_chunks(shape, seed))).astype(dtype).reshape(shape) if shape == b.shape else None
    top, diff, change, sums = 0.0, 0.0, 0.0, np.zeros(2)
    for f in range(0, b.shape[2], 8):  # a few frames at a time: a full-size video is 0.57 G values
        x, y = (np.asarray(v[:, :, f : f + 8], np.float32) for v in (a, b))
        top, diff = max(top, float(np.abs(y).max())), max(diff, float(np.abs(x - y).max()))
        if noise is not None:
            moved = np.abs(y - noise[:, :, f : f + 8].astype(np.float32))
            change, sums = max(change, float(moved.max())), sums + (np.abs(x - y).sum(), moved.sum())
    line = f"agreement (a: ltx-jax, b: ltx-core, same noise): max|a-b| / max|b| = {diff:.3g} / {top:.3g}"
    line += f" = {diff / top:.3g}"
    if change:
        line += f"; / max|b-x_T| = {diff / change:.3g}; mean|a-b| / mean|b-x_T| = {sums[0] / sums[1]:.3g}"
    return line


def compare(args: argparse.Namespace) -> None:
    """The table for --work's IMPL/result.json files, and the videos' agreement where both finished."""
    results = {}
    for impl in IMPLS:
        path = args.work / impl / "result.json"
        results[impl] = json.loads(path.read_text()) if path.exists() else {"status": "not run"}
    print(f"{'impl':9} {'attention':30} {'dtype':9} {'tiling F/O,H/O,W/O':22} {'load s':>7} {'first s':>8} "
          f"{'warm median s (n)':>18} {'peak GiB':>9}")  # fmt: skip
    for impl, r in results.items():
        if r["status"] != "ok":
            print(f"{impl:9} {r['status']}" + (f" (tiling {r['tiling']})" if "tiling" in r else ""))
            continue
        warm = f"{statistics.median(r['warm_s']):.2f} ({len(r['warm_s'])})"
        peak = "n/a" if r["peak_bytes"] is None else f"{r['peak_bytes'] / GIB:.2f}"
        print(f"{impl:9} {r['attention'][:30]:30} {r['dtype']:9} {r['tiling']:22} {r['load_s']:7.2f} "
              f"{r['first_s']:8.2f} {warm:>18} {peak:>9}")  # fmt: skip
    for impl, r in results.items():
        if r["status"] == "ok":
            tiles = f", tiles: {r['tiles']}" if "tiles" in r else ""
            warm = ", ".join(f"{s:.2f}" for s in r["warm_s"])
            print(f"  {impl}: {r['version']} on {r['device']}; latent {r['latent_shape']}; tiling {r['tiling_from']}"
                  f"{tiles}; warm s: {warm}")  # fmt: skip
    if all(r["status"] == "ok" for r in results.values()):
        keys = [
            k
            for k in ("dtype", "latent_shape", "tiling", "noise_shape")
            if len({str(r[k]) for r in results.values()}) > 1
        ]
        if keys:
            print(f"not compared: the runs differ in {', '.join(keys)}")
        else:
            print(agreement(args.work, results, args.seed))


def run_all(args: argparse.Namespace) -> None:
    """Inputs, then each implementation in its own process (ltx-core first: it resolves --tiling auto), the table."""
    decoder, latent = write_inputs(args)
    tiling, finished = args.tiling, []
    for impl in args.impls:
        result = launch(args, impl, decoder, latent, tiling)
        tiling = result.get("tiling", tiling) if tiling == "auto" else tiling  # the same tiles: upstream's pick
        finished.append(result["status"] == "ok")
    compare(args)
    if not all(finished):
        sys.exit(1)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = Parser(prog="bench_diffusion_decode.py", description=__doc__.split("\n", 1)[0])
    p.add_argument("command", choices=("all", "run", "compare"))
    p.add_argument("--impl", choices=IMPLS, help="run: which implementation")
    p.add_argument("--impls", default=",".join(IMPLS), help="all: which implementations, in this order")
    for flag, what in (("file", "the CausalDiffusionVAE file"), ("latent", "float32 .npy"), ("out", "a folder")):
        p.add_argument(f"--{flag}", type=Path, help=f"run: {what}")
    p.add_argument("--work", type=Path, help="all, compare: the inputs and a folder per implementation")
    p.add_argument("--tiny", action="store_true", help=f"the writer's tiny decoder, H, W, F = {SIZES[True]}")
    for flag, size in zip(("height", "width", "frames"), SIZES[False], strict=True):
        p.add_argument(f"--{flag}", type=int, help=f"video {flag} (default {size}; --tiny: smaller)")
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    p.add_argument("--tiling", help=f"auto, none or F/O,H/O,W/O (default auto; --tiny: {TINY_TILING})")
    p.add_argument("--repeats", type=int, default=3, help="warm decodes (their median is reported)")
    p.add_argument("--budget", type=float, default=150.0, help="s after the first call's start: no warm one starts")
    p.add_argument("--timeout", type=float, default=240.0, help="all: s each implementation's process may take")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--allow-eager", action="store_true", help="let ltx-core time eager SDPA attention on a GPU")
    for impl in ("jax", "core"):
        p.add_argument(f"--{impl}-python", default=sys.executable, help=f"all: ltx-{impl}'s interpreter")
        p.add_argument(f"--{impl}-pythonpath", help=f"all: PYTHONPATH of ltx-{impl}'s process (default: inherited)")
    return check_args(p.parse_args(argv))


def check_args(args: argparse.Namespace) -> argparse.Namespace:
    for flag, size in zip(("height", "width", "frames"), SIZES[args.tiny], strict=True):
        setattr(args, flag, size if getattr(args, flag) is None else getattr(args, flag))
    args.tiling = args.tiling or (TINY_TILING if args.tiny else "auto")
    args.work = args.work or Path("/tmp/bench_diffusion_decode" + ("-tiny" if args.tiny else ""))
    args.impls = args.impls.split(",")
    for flag in ("height", "width"):
        if getattr(args, flag) <= 0 or getattr(args, flag) % 32:
            fail(f"--{flag}={getattr(args, flag)}: must be a positive multiple of 32 (the VAE's pixels per latent)")
    if args.frames <= 0 or (args.frames - 1) % 8:
        fail(f"--frames={args.frames}: must be 8 k + 1 (1, 9, 17, ..., 121)")
    for flag in ("repeats", "budget", "timeout"):
        if getattr(args, flag) <= 0:
            fail(f"--{flag}={getattr(args, flag)}: must be positive")
    if any(impl not in IMPLS for impl in args.impls):
        fail(f"--impls={','.join(args.impls)}: choose from {','.join(IMPLS)}")
    parse_tiling(args.tiling)
    if args.command == "run" and None in (args.impl, args.file, args.latent, args.out):
        fail("run needs --impl, --file, --latent and --out")
    return args


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    {"all": run_all, "run": run, "compare": compare}[args.command](args)


if __name__ == "__main__":
    main(sys.argv[1:])
