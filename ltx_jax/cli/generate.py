"""Generate a video with audio from LTX-2, the DiT split over a device mesh.

    ltx-jax generate --mesh 8                   # embedded tiny random-weight model, no download
    ltx-jax generate --mesh 8 --checkpoint-path ltx-2.3-22b-dev.safetensors --gemma-root gemma-3-12b-it \\
        --pipeline two-stage --spatial-upsampler-path upsampler.safetensors \\
        --distilled-lora distilled-lora.safetensors --output-path out.mp4

(`python scripts/generate.py ...` is the same command.) Flags are named like ltx-pipelines'; an unset
generation flag takes the pipeline's default (the reference's for a checkpoint). Without a GPU the
mesh is made of simulated CPU devices. This command parses the flags into ltx_jax's typed options
and calls `ltx_jax.LTXPipeline`.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ltx_jax.cli.model_flags import (
    NOT_A_NUMBER,
    check_compile_cache,
    checkpoint_files,
    cluster_flags,
    devices_and_cluster,
    finite_float,
    flow_flag,
    mesh_and_runtime,
    mesh_flags,
    model_flags,
    use_compile_cache,
)
from ltx_jax.cli.prompts import DEFAULT_PROMPT, check_enhance_prompt, load_prompt_embeddings, prompts_of
from ltx_jax.cli.summary import Compilations, describe_mesh, format_summary, save_latents

# Imported before JAX's backends start: none of these modules touches a device at import.
from ltx_jax.interrupts import check_stop, describe, exit_status, signals_interrupt
from ltx_jax.parallel.cluster import check_same_everywhere, leave
from ltx_jax.pipeline import GenerationSettings, Guidance, ImageCondition, RetakeSpan, VideoCondition, flows
from ltx_jax.pipeline.defaults import EMBEDDED_DEFAULTS, reference_guidance
from ltx_jax.pipeline.images import DEFAULT_IMAGE_CRF, LTX_2_4_IMAGE_CRF
from ltx_jax.pipeline.media_io import check_audio_suffix

_REFERENCE = reference_guidance(28).video
GUIDANCE_FLAGS = {  # MultiModalGuiderParams field -> (flag suffix, help)
    "cfg_scale": ("cfg-guidance-scale", "CFG scale"),
    "stg_scale": ("stg-guidance-scale", f"STG scale (reference: {_REFERENCE.stg_scale})"),
    "stg_blocks": ("stg-blocks", "STG blocks (reference: 28 on 2.3, 29 on 2.0)"),
    "rescale_scale": ("rescale-scale", f"rescale (reference: {_REFERENCE.rescale_scale})"),
    "skip_step": ("skip-step", "reuse x0 on k of k+1 steps (reference: 0)"),
}
PROCESS_LOCAL = ("process_id", "output_path", "save_latents")  # flags that may differ between processes
CROSS_MODALITY = {"video": "a2v", "audio": "v2a"}  # the modality-guidance flag of each stream


def guidance_flags(parser: argparse.ArgumentParser, modality: str) -> None:
    group = parser.add_argument_group(f"{modality} guidance (unset: the pipeline's default)")
    reference = reference_guidance(28)
    cfg = getattr(reference, modality).cfg_scale
    for field, (suffix, text) in GUIDANCE_FLAGS.items():
        kind = {"stg_blocks": int, "skip_step": int}.get(field, finite_float)
        extra = {"nargs": "*"} if field == "stg_blocks" else {}
        text = f"CFG scale (reference: {cfg})" if field == "cfg_scale" else text
        group.add_argument(f"--{modality}-{suffix}", dest=f"{modality}.{field}", type=kind, help=text, **extra)
    cross = CROSS_MODALITY[modality]
    group.add_argument(
        f"--{cross}-guidance-scale",
        dest=f"{modality}.modality_scale",
        type=finite_float,
        help=f"modality guidance (reference: {_REFERENCE.modality_scale})",
    )


def size_help(name: str, unit: str) -> str:
    one, two = flows.get("one-stage").defaults("2.3"), flows.get("two-stage").defaults("2.3")
    return (
        f"{unit} (default: {getattr(one, name)} one-stage, {getattr(two, name)} two-stage; "
        f"embedded {getattr(EMBEDDED_DEFAULTS, name)})"
    )


def parse_args(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    run = mesh_flags(parser)
    run.add_argument(
        "--output-path", type=Path, help="mp4 to write (default output.mp4); --pipeline t2a: a .wav (output.wav)"
    )
    run.add_argument("--save-latents", type=Path, help="also write the final video/audio latents to this .npz")
    cluster_flags(parser)
    models = model_flags(parser)
    models.add_argument("--prompt-embeddings", type=Path, help=".npz with video/audio[/negative_video/negative_audio]")
    gen = parser.add_argument_group("generation (unset: the pipeline's default)")
    flow_flag(gen)
    gen.add_argument("--prompt", action="append", help=f"repeatable: one video each (default {DEFAULT_PROMPT!r})")
    gen.add_argument("--prompts-file", type=Path, help="a text file, one prompt per line: one video each")
    gen.add_argument("--negative-prompt", help="default: the reference's")
    gen.add_argument(
        "--enhance-prompt", action="store_true",
        help="Gemma 3 rewrites each prompt first (ltx-pipelines' system prompts; it sees the first --image)",
    )  # fmt: skip
    gen.add_argument("--height", type=int, help=size_help("height", "pixels"))
    gen.add_argument("--width", type=int, help=size_help("width", "pixels"))
    gen.add_argument("--num-frames", type=int, help=size_help("num_frames", "8k+1 frames"))
    gen.add_argument(
        "--auto-duration", nargs=2, type=finite_float, metavar=("MIN", "MAX"),
        help="instead of --num-frames: the frames LTX-2.5's duration head predicts from the prompt, within MIN-MAX "
        "seconds (needs --duration-head-path; the default there without --num-frames: 1 20)",
    )  # fmt: skip
    gen.add_argument("--frame-rate", type=finite_float, help="fps (default 24)")
    gen.add_argument("--num-inference-steps", type=int, help="steps (default 30 on 2.3 and 2.5, 40 on 2.0; embedded 8)")
    gen.add_argument("--seed", type=int, help="random seed (default 10)")
    gen.add_argument(
        "--image", nargs="+", action="append", default=[], metavar="PATH FRAME_IDX STRENGTH [CRF]",
        help=f"condition on an image (CRF: its H.264 compression first, default the model's: {DEFAULT_IMAGE_CRF}, "
        f"{LTX_2_4_IMAGE_CRF} from LTX-2.4; 0: none)",
    )  # fmt: skip
    gen.add_argument(
        "--video-conditioning", nargs=2, action="append", default=[], metavar=("PATH", "STRENGTH"),
        help="ic-lora: a reference video (depth, pose, edges) for stage 1 (repeatable)",
    )  # fmt: skip
    gen.add_argument("--skip-stage-2", action="store_true", help="ic-lora: decode stage 1's half-size result")
    gen.add_argument(
        "--conditioning-attention-mask", nargs=2, metavar=("MASK_PATH", "STRENGTH"),
        help="ic-lora: a grayscale video over the reference's frames (white = full attention) and a strength",
    )  # fmt: skip
    gen.add_argument(
        "--reference-video", help="dubit: the video to dub, with its audio track (its frames, frame rate and voice)"
    )
    gen.add_argument(
        "--reference-strength", type=finite_float, help="dubit: how much of --reference-video's frames is kept (1)"
    )
    gen.add_argument("--video-path", help="retake: the source video whose --start-time..--end-time is generated again")
    gen.add_argument("--start-time", type=finite_float, help="retake: seconds where the regenerated span starts")
    gen.add_argument("--end-time", type=finite_float, help="retake: seconds where it ends (the rest is kept)")
    gen.add_argument("--audio-path", help="a2vid: the audio (wav, mp3, m4a, a video's track) to make a video for")
    gen.add_argument(
        "--audio-start-time", type=finite_float, default=0.0, help="a2vid: seconds into --audio-path (default 0)"
    )
    gen.add_argument(
        "--audio-max-duration", type=finite_float, help="a2vid: seconds of audio (default: the video's length)"
    )
    guidance_flags(parser, "video")
    guidance_flags(parser, "audio")
    return parser.parse_args(argv)


def guidance_of(args: argparse.Namespace, defaults: Guidance) -> Guidance | None:
    """The guidance flags given, over the pipeline's defaults; None when none is given. An audio-only flow takes
    the --audio-* flags but --v2a-guidance-scale (1.2.0's t2a has no others)."""
    if flows.get(args.pipeline).audio_only:
        given = [f"--video-{suffix}" for field, (suffix, _) in GUIDANCE_FLAGS.items() if getattr(args, f"video.{field}")
                 is not None]  # fmt: skip
        given += [f"--{cross}-guidance-scale" for modality, cross in CROSS_MODALITY.items()
                  if getattr(args, f"{modality}.modality_scale") is not None]  # fmt: skip
        if given:
            raise ValueError(
                f"{', '.join(given)}: --pipeline {args.pipeline} makes audio only; it takes the other --audio-* "
                "guidance flags."
            )
    streams = {}
    for modality in ("video", "audio"):
        fields = [*GUIDANCE_FLAGS, "modality_scale"]
        given = {f: getattr(args, f"{modality}.{f}") for f in fields if getattr(args, f"{modality}.{f}") is not None}
        streams[modality] = dataclasses.replace(getattr(defaults, modality), **given) if given else None
    if not any(streams.values()):
        return None
    return Guidance(*(streams[m] or getattr(defaults, m) for m in ("video", "audio")))


def images_of(args: argparse.Namespace) -> tuple[ImageCondition, ...]:
    images = []
    for values in args.image:
        given = " ".join(values)
        if len(values) not in (3, 4):
            raise ValueError(f"--image {given}: give PATH FRAME_IDX STRENGTH [CRF] (3 or 4 values), got {len(values)}.")
        path, frame, strength, *crf = values
        try:
            images.append(ImageCondition(path, int(frame), finite_float(strength), *(int(c) for c in crf)))
        except NOT_A_NUMBER:
            raise ValueError(
                f"--image {given}: FRAME_IDX must be an integer, STRENGTH a finite number and CRF an integer."
            ) from None
    return tuple(images)


def reference_videos_of(args: argparse.Namespace) -> tuple[VideoCondition, ...]:
    if flows.get(args.pipeline).needs.audio_input == "reference":
        return (dubbed_video_of(args),)
    if given := [flag for flag in ("reference_video", "reference_strength") if getattr(args, flag) is not None]:
        raise ValueError(f"{', '.join('--' + g.replace('_', '-') for g in given)}: these belong to --pipeline dubit.")
    videos = []
    for path, strength in args.video_conditioning:
        try:
            videos.append(VideoCondition(path, finite_float(strength)))
        except NOT_A_NUMBER:
            raise ValueError(f"--video-conditioning {path} {strength}: STRENGTH must be a finite number.") from None
    return tuple(videos)


def dubbed_video_of(args: argparse.Namespace) -> VideoCondition:
    """dubit's --reference-video and --reference-strength (default 1, as 1.2.0's), instead of --video-conditioning."""
    if args.video_conditioning:
        raise ValueError(f"--video-conditioning: --pipeline {args.pipeline} takes --reference-video PATH instead.")
    if args.reference_video is None:
        raise ValueError(f"--pipeline {args.pipeline} needs --reference-video PATH: the video to dub, with its audio.")
    return VideoCondition(args.reference_video, 1.0 if args.reference_strength is None else args.reference_strength)


def attention_mask_of(args: argparse.Namespace) -> tuple[float, str | None]:
    """`--conditioning-attention-mask MASK_PATH STRENGTH` as (strength, path); unset: (1.0, None)."""
    if args.conditioning_attention_mask is None:
        return 1.0, None
    path, strength = args.conditioning_attention_mask
    try:
        return finite_float(strength), path
    except NOT_A_NUMBER:
        raise ValueError(
            f"--conditioning-attention-mask {path} {strength}: STRENGTH must be a finite number."
        ) from None


def retake_of(args: argparse.Namespace) -> RetakeSpan | None:
    """--video-path, --start-time and --end-time: all three, with a flow that retakes a source video only."""
    given = {flag: value for flag, value in (("--video-path", args.video_path), ("--start-time", args.start_time),
                                             ("--end-time", args.end_time)) if value is not None}  # fmt: skip
    if not flows.get(args.pipeline).needs.source_video:
        if given:
            raise ValueError(f"{', '.join(given)}: these belong to --pipeline retake (or retake-guided).")
        return None
    if len(given) < 3:
        missing = sorted({"--video-path", "--start-time", "--end-time"} - set(given))
        raise ValueError(
            f"--pipeline {args.pipeline} needs --video-path, --start-time and --end-time; missing {missing}."
        )
    return RetakeSpan(args.video_path, args.start_time, args.end_time)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Checks every flag, builds the pipeline, generates, writes the mp4 (process 0); returns the summary."""
    import jax  # noqa: PLC0415

    from ltx_jax.config import LTXConfig  # noqa: PLC0415
    from ltx_jax.pipeline.embedded import EMBEDDED_CONFIG  # noqa: PLC0415
    from ltx_jax.pipeline.prompt_batch import check_writable, load_and_encode  # noqa: PLC0415
    from ltx_jax.pipeline.prompts import check_embeddings  # noqa: PLC0415

    # Only process 0 writes, so the output paths may differ; everything that shapes the result may not.
    check_same_everywhere({k: v for k, v in vars(args).items() if k not in PROCESS_LOCAL})
    audio_only = flows.get(args.pipeline).audio_only
    if args.output_path is None:
        args.output_path = Path("output.wav" if audio_only else "output.mp4")
    for flag, path in (("--output-path", args.output_path), ("--save-latents", args.save_latents)):
        if path is not None:
            check_writable(flag, path)
    if audio_only:
        check_audio_suffix(args.output_path, "--output-path")
    files = checkpoint_files(args)
    if files is not None:
        files.check(args.pipeline)
    defaults = flows.get(args.pipeline).defaults("embedded") if files is None else files.defaults(args.pipeline)
    strength, mask = attention_mask_of(args)
    settings = GenerationSettings(
        height=args.height, width=args.width, num_frames=args.num_frames, frame_rate=args.frame_rate,
        num_inference_steps=args.num_inference_steps, seed=args.seed, images=images_of(args),
        guidance=guidance_of(args, defaults.guidance), reference_videos=reference_videos_of(args),
        skip_stage_2=args.skip_stage_2, reference_attention_strength=strength, attention_mask_video=mask,
        audio_path=args.audio_path, audio_start_time=args.audio_start_time,
        audio_max_duration=args.audio_max_duration, retake=retake_of(args), enhance_prompt=args.enhance_prompt,
        auto_duration=None if args.auto_duration is None else tuple(args.auto_duration),
    )  # fmt: skip
    head = files is not None and files.duration_head_path is not None
    # every generation argument checked before anything is built
    settings = settings.with_duration_head(args.pipeline, head).resolve(defaults, args.pipeline)
    if args.enhance_prompt or args.prompt_enhancer_gemma_root is not None:
        check_enhance_prompt(args, files, settings)
    prompts, negative = prompts_of(args), args.negative_prompt
    if args.prompt_embeddings is not None:
        prompt, negative = load_prompt_embeddings(args.prompt_embeddings)
        cfg = LTXConfig.from_metadata(EMBEDDED_CONFIG) if files is None else files.dit_config()
        cfg = flows.get(args.pipeline).dit_config(cfg)  # t2a: the audio context alone
        for name, embeddings in (("prompt", prompt), ("negative_prompt", negative)):
            if embeddings is not None:
                check_embeddings(cfg, f"--prompt-embeddings {args.prompt_embeddings}: {name}", embeddings)
        prompts = [prompt]
    mesh, runtime = mesh_and_runtime(args)
    compilations = Compilations()
    loaded = load_and_encode(
        files, prompts, settings, flow=args.pipeline, mesh=mesh, runtime=runtime, negative_prompt=negative,
        on_enhanced=print_enhanced,
    )  # fmt: skip
    check_stop()  # a signal during loading or encoding stops every process here
    settings = settings.without_prompt_enhancement()  # the prompts are enhanced and encoded
    videos, pipe = [], loaded.pipeline
    for i, (context, negative_context) in enumerate(loaded.contexts):  # loaded and compiled once for all
        path = numbered(args.output_path, i, len(prompts))
        with compilations:
            enhanced = loaded.enhanced[i]
            out = pipe.generate(context, settings, negative_prompt=negative_context, enhanced_prompt=enhanced)
        if jax.process_index() == 0:  # only process 0 decodes and writes
            path.parent.mkdir(parents=True, exist_ok=True)
            # after decoding: interleaved (generate's output_path) was not shown faster
            # (benchmarks/results/2026-12-03/README.md, "Fifth round")
            start = time.perf_counter()
            out.save(path)
            out.timings["wav_writing" if audio_only else "mp4_writing"] = time.perf_counter() - start
            if args.save_latents is not None:
                save_latents(numbered(args.save_latents, i, len(prompts)), out)
        videos.append({"output": out, "path": path, "compiling": compilations.summary()})
        check_stop()  # every process, once process 0 has written the video
    timing = {"load_s": loaded.load_s, "encode_s": loaded.encode_s, "peaks": loaded.peaks}
    return {"weights": pipe.description, "pipeline": args.pipeline, "mesh": describe_mesh(mesh, runtime),
            **timing, "enhanced": loaded.enhanced, "videos": videos}  # fmt: skip


def print_enhanced(prompt: str) -> None:
    import jax  # noqa: PLC0415

    if jax.process_index() == 0:
        print(f"enhanced prompt: {prompt}", flush=True)


def numbered(path: Path, index: int, count: int) -> Path:
    """`path` for one video; `stem-001.mp4`, `stem-002.mp4`, ... for several."""
    return path if count == 1 else path.with_name(f"{path.stem}-{index + 1:03d}{path.suffix}")


def main(argv: list[str] | None = None, prog: str | None = None) -> None:
    args = parse_args(argv, prog)
    with signals_interrupt():  # from here on SIGTERM / SIGHUP end the run like Ctrl-C: one line, no partial file
        reporting_errors(args, lambda: start_and_run(args))


def start_and_run(args: argparse.Namespace) -> None:
    """Checks the process flags, sets the devices up, runs, prints the summary."""
    check_compile_cache(args)
    devices_and_cluster(args)  # before JAX initializes its backends
    import jax  # noqa: PLC0415 - its backends start after the device setup

    use_compile_cache(args)
    start = time.perf_counter()
    print(f"devices: {jax.device_count()} x {jax.devices()[0].device_kind} ({jax.default_backend()})")
    info = run(args)
    info["total_s"] = time.perf_counter() - start
    print(format_summary(info))


USAGE_ERRORS = (ValueError, TypeError, FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


def reporting_errors(args: argparse.Namespace, work: Callable[[], object], what: str = "generation") -> object:
    """`work()`; a bad argument, a failure or an interruption ends the process with one line on stderr
    (status 2, 1, or 128 + the signal; `what` names what the interruption stopped) instead of a traceback,
    unless --debug."""
    try:
        return work()
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM / SIGHUP as `Terminated`
        print(describe(interrupt, what), file=sys.stderr)
        leave(exit_status(interrupt))
    except USAGE_ERRORS as error:
        if args.debug:
            raise
        print(f"error: {one_line(error)}", file=sys.stderr)
        leave(2)
    except Exception as error:
        if args.debug:
            raise
        print(f"error: {type(error).__name__}: {one_line(error)} (--debug shows the traceback)", file=sys.stderr)
        leave(1)


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split())
