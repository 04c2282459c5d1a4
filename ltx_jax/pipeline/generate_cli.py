"""What `scripts/generate.py` runs: build the components, encode or load the prompt, generate,
decode, write the mp4 (process 0 only), and report.

Kept apart from the script so that the script can configure JAX's devices before anything imports
JAX, and so that tests can run a generation in-process.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from ltx_jax.parallel import SequenceParallel, make_mesh
from ltx_jax.parallel.strategies import check_layout
from ltx_jax.pipeline import components as component_builders
from ltx_jax.pipeline.embedded import EMBEDDED_DEFAULTS
from ltx_jax.pipeline.guiders import MultiModalGuiderParams
from ltx_jax.pipeline.media_io import write_mp4
from ltx_jax.pipeline.pipelines import ImageCondition, Request, generate, validate
from ltx_jax.pipeline.stages import Guidance, PromptEmbeddings


class TimedForward:
    """Wraps the DiT: waits for each forward and records its wall time, per token count."""

    def __init__(self, forward: Any) -> None:  # noqa: ANN401 - any DiT callable
        self.forward, self.seconds = forward, {}

    def __call__(self, video: Any, audio: Any, perturbations: Any = None) -> tuple:  # noqa: ANN401
        start = time.perf_counter()
        out = jax.block_until_ready(self.forward(video, audio, perturbations))
        tokens = None if video is None else video.latent.shape[1]
        self.seconds.setdefault(tokens, []).append(time.perf_counter() - start)
        return out


def check_same_arguments(args: argparse.Namespace) -> None:
    """In a multi-process run every process must be given the same generation arguments."""
    if jax.process_count() == 1:
        return
    from jax.experimental import multihost_utils  # noqa: PLC0415

    # Only process 0 writes, so the output paths may differ; everything that shapes the result may not.
    local = ("process_id", "output_path", "save_latents")
    relevant = {k: str(v) for k, v in sorted(vars(args).items()) if k not in local}
    digest = np.frombuffer(hashlib.sha256(json.dumps(relevant).encode()).digest()[:8], np.int32)
    try:
        multihost_utils.assert_equal(digest)
    except AssertionError:
        raise ValueError(
            "the processes were given different generation arguments: start every process with the same flags "
            "(only --process-id and the output paths may differ)."
        ) from None


def guidance_params(args: argparse.Namespace, modality: str, cross: str, stg_blocks: tuple[int, ...]) -> Any:  # noqa: ANN401
    blocks = getattr(args, f"{modality}_stg_blocks")
    return MultiModalGuiderParams(
        cfg_scale=getattr(args, f"{modality}_cfg_guidance_scale"),
        stg_scale=getattr(args, f"{modality}_stg_guidance_scale"),
        stg_blocks=stg_blocks if blocks is None else tuple(blocks),
        rescale_scale=getattr(args, f"{modality}_rescale_scale"),
        modality_scale=getattr(args, f"{cross}_guidance_scale"),
        skip_step=getattr(args, f"{modality}_skip_step"),
    )


def load_prompt_embeddings(path: Path) -> tuple[PromptEmbeddings, PromptEmbeddings | None]:
    """An .npz with `video` and/or `audio` (B, S, D) and optionally `negative_video`/`negative_audio`."""
    if not path.is_file():
        raise FileNotFoundError(f"--prompt-embeddings {path} does not exist.")
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    unknown = set(arrays) - {"video", "audio", "negative_video", "negative_audio"}
    if unknown or not ({"video", "audio"} & set(arrays)):
        raise ValueError(
            f"--prompt-embeddings {path} holds {sorted(arrays)}; expected 'video' and/or 'audio' (B, S, D) "
            "arrays, optionally 'negative_video' and 'negative_audio'."
        )
    prompt = PromptEmbeddings(arrays.get("video"), arrays.get("audio"))
    has_negative = "negative_video" in arrays or "negative_audio" in arrays
    negative = PromptEmbeddings(arrays.get("negative_video"), arrays.get("negative_audio")) if has_negative else None
    return prompt, negative


def build_request(args: argparse.Namespace, assembly: Any) -> Request:  # noqa: ANN401
    defaults = assembly.defaults
    video = guidance_params(args, "video", "a2v", defaults["stg_blocks"])
    audio = guidance_params(args, "audio", "v2a", defaults["stg_blocks"])
    # The distilled flow runs without guidance; otherwise CFG needs the negative prompt.
    needs_negative = args.pipeline != "distilled" and (
        video.do_unconditional_generation() or audio.do_unconditional_generation()
    )
    if args.prompt_embeddings is not None:
        prompt, negative = load_prompt_embeddings(args.prompt_embeddings)
    elif assembly.encode_prompt is not None:
        prompt = assembly.encode_prompt(args.prompt)
        negative = assembly.encode_prompt(args.negative_prompt) if needs_negative else None
    else:
        raise ValueError(
            "A checkpoint run needs the prompt encoded: pass --gemma-root GEMMA_DIR (Gemma 3 weights and "
            "tokenizer), or --prompt-embeddings FILE.npz with the video/audio contexts (and "
            "negative_video/negative_audio for guidance)."
        )
    if needs_negative and negative is None:
        raise ValueError(
            "CFG needs the negative prompt's embeddings: add negative_video/negative_audio to --prompt-embeddings, "
            "or pass --video-cfg-guidance-scale 1 --audio-cfg-guidance-scale 1."
        )
    return dataclasses.replace(
        sized_request(args, defaults),
        prompt=prompt,
        num_inference_steps=args.num_inference_steps or defaults["num_inference_steps"],
        guidance=Guidance(video, audio, negative),
    )


def sized_request(args: argparse.Namespace, defaults: dict[str, Any]) -> Request:
    """The request's sizes, images and seed from the flags (no prompt yet)."""
    images = tuple(ImageCondition(path, int(frame), float(strength)) for path, frame, strength in args.image)
    return Request(
        prompt=PromptEmbeddings(None, None),
        height=args.height or defaults["height"],
        width=args.width or defaults["width"],
        num_frames=args.num_frames or defaults["num_frames"],
        frame_rate=args.frame_rate,
        seed=args.seed,
        images=images,
        max_batch_size=args.max_batch_size,
    )


_CHECKPOINT_ONLY = {
    "gemma_root": "--gemma-root",
    "prompt_cache_dir": "--prompt-cache-dir",
    "prompt_embeddings": "--prompt-embeddings",
    "spatial_upsampler_path": "--spatial-upsampler-path",
    "distilled_lora": "--distilled-lora",
    "shard_weights": "--shard-weights",
}


def preflight(args: argparse.Namespace) -> Mesh:
    """Everything that can be refused before loading anything: flags that do not apply to this run,
    the sizes, the images, and the mesh and strategy against the model's heads (read from the config
    alone). Returns the mesh."""
    if args.checkpoint_path is None:
        given = [flag for name, flag in _CHECKPOINT_ONLY.items() if getattr(args, name)]
        given += ["--dtype"] if args.dtype != "bfloat16" else []
        if given:
            raise ValueError(
                f"{', '.join(given)} apply to --checkpoint-path runs; the embedded default builds its own tiny "
                "float32 models. Add --checkpoint-path, or drop them."
            )
    if args.pipeline == "distilled" and (args.distilled_lora or args.num_inference_steps):
        raise ValueError(
            "--pipeline distilled runs fixed sigmas (8 + 3 steps) on the distilled checkpoint itself: drop "
            "--distilled-lora and --num-inference-steps (the two-stage flow takes them)."
        )
    defaults = component_builders.CHECKPOINT_DEFAULTS if args.checkpoint_path else EMBEDDED_DEFAULTS
    validate(sized_request(args, defaults), args.pipeline)
    for path, _, _ in args.image:
        if not Path(path).is_file():
            raise FileNotFoundError(f"--image {path} does not exist.")
    mesh = make_mesh(args.mesh, ulysses=args.ulysses_degree if args.strategy == "usp" else None)
    check_layout(component_builders.model_config(args), mesh, args.strategy, args.backend)
    return mesh


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Generates per `args` (see scripts/generate.py); returns the summary."""
    check_same_arguments(args)
    mesh = preflight(args)
    assembly = component_builders.build(args, mesh)
    request = build_request(args, assembly)
    options = {"backend": args.backend, "strategy": args.strategy}
    timed = TimedForward(SequenceParallel(assembly.model, mesh, **options))
    stage_2 = None
    if assembly.stage_2_model is not None:
        stage_2 = TimedForward(SequenceParallel(assembly.stage_2_model, mesh, **options))
    parts = dataclasses.replace(assembly.components, transformer=timed, stage_2_transformer=stage_2)
    start = time.perf_counter()
    video_latent, audio_latent = generate(parts, request, args.pipeline)
    denoise_s = time.perf_counter() - start
    waveform, sample_rate = None, 0
    if jax.process_index() == 0:  # the others computed the same latents; only process 0 decodes and writes
        frames = assembly.decode_video(video_latent)
        if audio_latent is not None:
            waveform, sample_rate = assembly.decode_audio(audio_latent)
        write_outputs(args, request, frames, waveform, sample_rate, (video_latent, audio_latent))
    return summary(args, assembly, request, [timed, stage_2], waveform, sample_rate, denoise_s)


def write_outputs(
    args: argparse.Namespace,
    request: Request,
    frames: np.ndarray,
    waveform: np.ndarray | None,
    sample_rate: int,
    latents: tuple[jax.Array | None, jax.Array | None],
) -> None:
    args.output_path.parent.mkdir(parents=True, exist_ok=True)
    write_mp4(args.output_path, frames, request.frame_rate, waveform, sample_rate)
    if args.save_latents is not None:
        args.save_latents.parent.mkdir(parents=True, exist_ok=True)
        arrays = {
            name: np.asarray(v, np.float32)
            for name, v in zip(("video", "audio"), latents, strict=True)
            if v is not None
        }
        np.savez(args.save_latents, **arrays)


def summary(
    args: argparse.Namespace,
    assembly: Any,  # noqa: ANN401
    request: Request,
    forwards: list[TimedForward | None],
    waveform: np.ndarray | None,
    sample_rate: int,
    denoise_s: float,
) -> dict[str, Any]:
    per_shape = {}
    for forward in filter(None, forwards):
        for tokens, seconds in forward.seconds.items():
            warm = seconds[1:] or seconds  # the first call of a shape compiles
            per_shape[tokens] = {"forwards": len(seconds), "median_s": float(np.median(warm))}
    video = f"{request.width}x{request.height}, {request.num_frames} frames at {request.frame_rate:g} fps"
    audio = "none" if waveform is None else f"{waveform.shape[-1] / sample_rate:.2f} s at {sample_rate} Hz"
    return {
        "weights": assembly.description,
        "pipeline": args.pipeline,
        "mesh": f"{args.mesh} x {jax.devices()[0].device_kind} ({args.strategy}, {args.backend})",
        "video": video,
        "audio": audio if jax.process_index() == 0 else "(decoded by process 0)",
        "steps": request.num_inference_steps,
        "forwards": per_shape,
        "denoise_s": denoise_s,
        "output": str(args.output_path) if jax.process_index() == 0 else "(written by process 0)",
    }


def format_summary(info: dict[str, Any]) -> str:
    lines = [f"{key:>10}: {value}" for key, value in info.items() if key not in ("forwards", "total_s", "denoise_s")]
    for tokens, stats in info["forwards"].items():
        label = "audio only" if tokens is None else f"{tokens} video tokens"
        lines.append(
            f"{'DiT':>10}: {label}: {stats['forwards']} forwards, {stats['median_s'] * 1e3:.1f} ms each (median)"
        )
    lines.append(f"{'time':>10}: denoising {info['denoise_s']:.1f} s, total {info.get('total_s', 0.0):.1f} s")
    return "\n".join(lines)
