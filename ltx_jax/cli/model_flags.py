"""The flags `ltx-jax generate` and `ltx-jax serve` share: the mesh and how the DiT runs on it (`mesh_flags`), the
processes of a `jax.distributed` run (`cluster_flags`), the model files (`model_flags`), the flow (`flow_flag`), and
what they become: the devices and the cluster (`devices_and_cluster`), `CheckpointFiles` (`checkpoint_files`), the
mesh and `RuntimeOptions` (`mesh_and_runtime`), JAX's compilation cache (`check_compile_cache`, `use_compile_cache`).

Nothing here imports JAX at module level: the commands set the devices up before JAX starts its backends.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, get_args

# Imported before JAX's backends start: none of these modules touches a device at import.
from ltx_jax.convert.dit_tensors import PARAM_DTYPES, Lora
from ltx_jax.model.quantization import QUANTIZATIONS
from ltx_jax.parallel.exchange import ExchangeBackend
from ltx_jax.parallel.strategies import Strategy
from ltx_jax.pipeline import flows
from ltx_jax.user_cache import cache_dir

CHECKPOINT_ONLY = ("gemma_root", "prompt_cache_dir", "spatial_upsampler_path", "distilled_lora", "lora")
CHECKPOINT_ONLY += ("shard_weights", "dtype", "distilled_lora_strength_stage_1", "distilled_lora_strength_stage_2")
CHECKPOINT_ONLY += ("quantization", "components_path", "video_vae_path", "audio_vae_path", "text_encoder_path")
CHECKPOINT_ONLY += ("duration_head_path", "prompt_enhancer_gemma_root", "video_decode_tiling")


def finite_float(text: str) -> float:
    """An argparse type: a finite number (argparse names the flag in its error); NaN and inf are refused,
    as they would run to the end and write NaN frames and audio."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


NOT_A_NUMBER = (ValueError, argparse.ArgumentTypeError)


def decode_tiling(text: str) -> Any:  # noqa: ANN401 - a video_vae.TileSizeConfig
    """An argparse type: `video_vae.TileSizeConfig.parse` (argparse names the flag in its error)."""
    from ltx_jax.model.video_vae.tiling import TileSizeConfig  # noqa: PLC0415

    try:
        return TileSizeConfig.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def positive_int(text: str) -> int:
    """An argparse type: a whole number >= 1 (argparse names the flag in its error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def mesh_flags(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The "run" group: the mesh, the strategy and backend, the weights' dtype, the compilation cache."""
    run = parser.add_argument_group("run")
    run.add_argument("--mesh", type=positive_int, default=1, help="devices on the sequence-parallel axis (default 1)")
    run.add_argument("--backend", choices=get_args(ExchangeBackend), default="all_to_all", help="head exchange")
    run.add_argument("--strategy", choices=get_args(Strategy), default="ulysses", help="context parallelism")
    run.add_argument("--ulysses-degree", type=positive_int, help="with --strategy usp: devices per Ulysses group")
    run.add_argument("--cpu", action="store_true", help="simulated CPU devices even if a GPU is present")
    run.add_argument("--debug", action="store_true", help="show the traceback of an error instead of one line")
    run.add_argument(
        "--max-batch-size", type=positive_int, default=None, help="guidance passes per forward (default: all)"
    )
    run.add_argument("--dtype", choices=list(PARAM_DTYPES), help="weights with --checkpoint-path (default bfloat16)")
    run.add_argument(
        "--quantization", choices=QUANTIZATIONS, help="with --checkpoint-path: fp8-cast keeps the DiT blocks' linear "
        "weights in fp8 (half their memory), upcast in the matmuls; fp8 also multiplies and runs the video "
        "self-attention in fp8 (Hopper) (default none)",
    )  # fmt: skip
    run.add_argument(
        "--compile-cache-dir",
        default=str(cache_dir() / "jax_compilation"),
        help="JAX's persistent compilation cache, shared by runs and processes (default: %(default)s; 'none': off)",
    )
    return run


def cluster_flags(parser: argparse.ArgumentParser) -> None:
    cluster = parser.add_argument_group("several processes (jax.distributed; auto-detected under SLURM / Open MPI)")
    cluster.add_argument("--coordinator-address", help="HOST:PORT of process 0's coordinator")
    cluster.add_argument("--num-processes", type=positive_int, help="processes in the job")
    cluster.add_argument("--process-id", type=int, help="this process's index, 0..num-processes-1")
    cluster.add_argument(
        "--distributed-timeout", type=positive_int, default=120, help="seconds to wait for peers (120)"
    )


def devices_and_cluster(args: argparse.Namespace) -> None:
    """Before JAX starts its backends: each process's share of --mesh's devices (simulated CPU ones where there is
    no accelerator, or with --cpu), then the processes joined by `jax.distributed` where there are several."""
    from ltx_jax.cli.devices import simulate_cpu_devices_if_needed  # noqa: PLC0415
    from ltx_jax.parallel.cluster import Cluster  # noqa: PLC0415

    cluster = Cluster(
        coordinator_address=args.coordinator_address, num_processes=args.num_processes, process_id=args.process_id,
        timeout_s=args.distributed_timeout,
    )  # fmt: skip
    processes = cluster.size()
    if args.mesh % processes:
        raise ValueError(f"--mesh {args.mesh} must be a multiple of the {processes} processes (each brings devices).")
    cpu = simulate_cpu_devices_if_needed(args.mesh // processes, args.cpu)
    if processes > 1 or args.coordinator_address:
        cluster.join(cpu)


def model_flags(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """The "models" group: the model files and their options (none given: the embedded tiny model)."""
    models = parser.add_argument_group("models (none given: the embedded tiny random-weight default)")
    models.add_argument(
        "--checkpoint-path", type=Path,
        help="an official LTX-2 .safetensors (DiT, VAEs, vocoder), or a directory scripts/convert_checkpoint.py wrote",
    )  # fmt: skip
    models.add_argument(
        "--components-path", type=Path, help="with a converted --checkpoint-path: the .safetensors its VAEs, vocoder "
        "and text connectors come from (default: the file it was converted from, beside it)",
    )  # fmt: skip
    models.add_argument(
        "--transformer-path", type=Path, help="split files (LTX-2.5's layout), instead of --checkpoint-path: the "
        "transformer .safetensors (DiT and text connectors), with --video-vae-path and --audio-vae-path",
    )  # fmt: skip
    models.add_argument("--video-vae-path", type=Path, help="with --transformer-path: the video VAE .safetensors")
    models.add_argument(
        "--video-decode-tiling", type=decode_tiling, metavar="F/O,H/O,W/O",
        help="the video decoder's tiles: frames/overlap,pixels/overlap,pixels/overlap (0/0: an axis whole), or none "
        "(default: 80/24,768/64,768/64 for the convolutional decoder; for LTX-2.5's diffusion decoder the sizes "
        "ltx-pipelines' automatic tiling picks from free device memory)",
    )  # fmt: skip
    models.add_argument(
        "--audio-vae-path", type=Path, help="with --transformer-path: the audio VAE and vocoder .safetensors"
    )
    models.add_argument("--gemma-root", type=Path, help="Gemma directory (weights + tokenizer) to encode --prompt")
    models.add_argument(
        "--text-encoder-path", type=Path, help="instead of --gemma-root: the text encoder packed in one .safetensors "
        "(LTX-2.5's Gemma 4 file, tokenizer and projections inside)",
    )  # fmt: skip
    models.add_argument(
        "--duration-head-path", type=Path, help="LTX-2.5's duration head .safetensors (frames from the prompt: "
        "--auto-duration, the default without --num-frames)",
    )  # fmt: skip
    models.add_argument(
        "--prompt-enhancer-gemma-root", type=Path, help="with --enhance-prompt: a Gemma 3 directory that rewrites the "
        "prompts where the text encoder cannot (LTX-2.5's Gemma 4)",
    )  # fmt: skip
    models.add_argument("--prompt-cache-dir", type=Path, help="cache prompt contexts here (keyed by prompt + weights)")
    models.add_argument("--spatial-upsampler-path", type=Path, help="2x latent upsampler .safetensors")
    models.add_argument("--distilled-lora", nargs="+", metavar=("PATH", "STRENGTH"), help="stage-2 LoRA [strength]")
    for stage, default in ((1, 0.25), (2, 0.5)):
        models.add_argument(
            f"--distilled-lora-strength-stage-{stage}", type=finite_float,
            help=f"two-stage-hq: the distilled LoRA's strength in stage {stage} (default {default})",
        )  # fmt: skip
    models.add_argument(
        "--lora", nargs="+", action="append", metavar=("PATH", "STRENGTH"), help="a LoRA for every stage (repeatable)"
    )
    models.add_argument(
        "--shard-weights",
        action="store_true",
        help="split the DiT's weights over the mesh (FSDP: a process reads only its slices), not a copy per device",
    )
    return models


def flow_flag(group: argparse._ArgumentGroup) -> None:
    """`--pipeline`: the flow, one of `flows.names()`."""
    group.add_argument(
        "--pipeline", choices=flows.names(), default="one-stage",
        help="; ".join(f"{name}: {flows.get(name).summary}" for name in flows.names()),
    )  # fmt: skip


def lora_of(flag: str, values: list[str]) -> Lora:
    """`PATH [STRENGTH]` of `flag` as a `Lora`; raises `ValueError` naming the flag."""
    if len(values) > 2:
        raise ValueError(f"{flag} takes PATH [STRENGTH], got {len(values)} values: {values}.")
    try:
        return Lora(values[0], finite_float(values[1]) if len(values) == 2 else 1.0)
    except NOT_A_NUMBER:
        raise ValueError(f"{flag} {values[0]} {values[1]}: the strength must be a finite number, e.g. 0.8.") from None


def checkpoint_files(args: argparse.Namespace) -> Any:  # noqa: ANN401 - a CheckpointFiles, or None
    """The model files and their options, or None for the embedded default (which takes none of them)."""
    from ltx_jax.pipeline.model_ledger import CheckpointFiles  # noqa: PLC0415

    if args.checkpoint_path is None and args.transformer_path is None:
        given = [f"--{name.replace('_', '-')}" for name in CHECKPOINT_ONLY if getattr(args, name)]
        if given:
            raise ValueError(
                f"{', '.join(given)} apply to runs on model files; the embedded default builds its own tiny "
                "float32 models. Add --checkpoint-path (or --transformer-path), or drop them."
            )
        return None
    return CheckpointFiles(
        args.checkpoint_path,
        transformer_path=args.transformer_path,
        video_vae_path=args.video_vae_path,
        audio_vae_path=args.audio_vae_path,
        text_encoder_path=args.text_encoder_path,
        duration_head_path=args.duration_head_path,
        gemma_root=args.gemma_root,
        prompt_enhancer_gemma_root=args.prompt_enhancer_gemma_root,
        spatial_upsampler_path=args.spatial_upsampler_path,
        distilled_lora=None if args.distilled_lora is None else lora_of("--distilled-lora", args.distilled_lora),
        loras=tuple(lora_of("--lora", values) for values in args.lora or ()),
        prompt_cache_dir=args.prompt_cache_dir,
        dtype=args.dtype or "bfloat16",
        shard_weights=args.shard_weights,
        quantization=args.quantization or "none",
        components_path=args.components_path,
        video_decode_tiling=args.video_decode_tiling,
        **hq_strengths(args),
    )


def hq_strengths(args: argparse.Namespace) -> dict[str, float]:
    """The two-stage-hq flow's per-stage distilled-LoRA strengths that were given (refused for other flows)."""
    given = {
        f"distilled_lora_strength_stage_{stage}": getattr(args, f"distilled_lora_strength_stage_{stage}")
        for stage in (1, 2)
        if getattr(args, f"distilled_lora_strength_stage_{stage}") is not None
    }
    if given and flows.get(args.pipeline).needs.distilled_lora != "both_stages":
        flags = ", ".join(f"--{name.replace('_', '-')}" for name in given)
        users = [name for name in flows.names() if flows.get(name).needs.distilled_lora == "both_stages"]
        raise ValueError(
            f"{flags} apply to --pipeline {' or '.join(users)}; the {args.pipeline} flow does not use them."
        )
    return given


def mesh_and_runtime(args: argparse.Namespace) -> tuple[Any, Any]:
    """The mesh of --mesh (2-D with --strategy usp) and the `RuntimeOptions` of the run flags."""
    from ltx_jax.parallel import make_mesh  # noqa: PLC0415
    from ltx_jax.pipeline import RuntimeOptions  # noqa: PLC0415

    if args.strategy == "usp" and args.ulysses_degree is None:
        raise ValueError("--strategy usp needs --ulysses-degree U (devices per Ulysses group, dividing --mesh).")
    mesh = make_mesh(args.mesh, ulysses=args.ulysses_degree if args.strategy == "usp" else None)
    return mesh, RuntimeOptions(strategy=args.strategy, backend=args.backend, max_batch_size=args.max_batch_size)


def check_compile_cache(args: argparse.Namespace) -> None:
    """--compile-cache-dir is a directory (or missing: created) or 'none'."""
    cache = Path(args.compile_cache_dir)
    if args.compile_cache_dir != "none" and cache.exists() and not cache.is_dir():
        raise ValueError(f"--compile-cache-dir {cache} is a file; give a directory (created if missing) or 'none'.")


def use_compile_cache(args: argparse.Namespace) -> None:
    """JAX's persistent compilation cache in --compile-cache-dir (an entry point's setting, once JAX is imported)."""
    import jax  # noqa: PLC0415

    if args.compile_cache_dir != "none":  # keyed by JAX (program, devices, versions): safe to share
        jax.config.update("jax_compilation_cache_dir", args.compile_cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
