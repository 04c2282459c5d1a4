"""Generate a video with audio from LTX-2, the DiT split over a device mesh.

    python scripts/generate.py --mesh 8                   # embedded tiny random-weight model, no download
    python scripts/generate.py --mesh 8 --checkpoint-path ltx-2.3-22b-dev.safetensors \\
        --prompt-embeddings prompt.npz --pipeline two-stage --spatial-upsampler-path upsampler.safetensors \\
        --distilled-lora distilled-lora.safetensors --height 1024 --width 1536 --output-path out.mp4

Flags are named like ltx-pipelines'. Without a GPU the mesh is made of simulated CPU devices.
"""

import argparse
import os
import socket
import sys
import time
from pathlib import Path
from types import ModuleType

from device_setup import simulate_cpu_devices_if_needed

NEGATIVE_PROMPT = "blurry, out of focus, overexposed, underexposed, low contrast, distorted, artifacts"


def guidance_flags(parser: argparse.ArgumentParser, modality: str, cfg: float, cross: str) -> None:
    group = parser.add_argument_group(f"{modality} guidance (reference defaults)")
    group.add_argument(f"--{modality}-cfg-guidance-scale", type=float, default=cfg, help=f"CFG scale (default {cfg})")
    group.add_argument(f"--{modality}-stg-guidance-scale", type=float, default=1.0, help="STG scale (default 1.0)")
    group.add_argument(
        f"--{modality}-stg-blocks", type=int, nargs="*", default=None, help="STG blocks (default: 28 on 2.3, 29 on 2.0)"
    )
    group.add_argument(f"--{modality}-rescale-scale", type=float, default=0.7, help="rescale (default 0.7)")
    group.add_argument(f"--{cross}-guidance-scale", type=float, default=3.0, help="modality guidance (default 3.0)")
    group.add_argument(f"--{modality}-skip-step", type=int, default=0, help="reuse x0 on k of k+1 steps (default 0)")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    run = parser.add_argument_group("run")
    run.add_argument("--mesh", type=int, default=1, help="devices on the sequence-parallel axis (default 1)")
    run.add_argument("--backend", choices=["all_to_all", "ffi"], default="all_to_all", help="head exchange")
    run.add_argument(
        "--strategy", choices=["ulysses", "allgather_kv", "ring", "usp"], default="ulysses", help="context parallelism"
    )
    run.add_argument("--ulysses-degree", type=int, default=8, help="with --strategy usp: devices per Ulysses group")
    run.add_argument("--cpu", action="store_true", help="simulated CPU devices even if a GPU is present")
    run.add_argument("--max-batch-size", type=int, default=None, help="guidance passes per forward (default: all)")
    run.add_argument("--output-path", type=Path, default=Path("output.mp4"), help="mp4 to write (default output.mp4)")
    run.add_argument("--save-latents", type=Path, help="also write the final video/audio latents to this .npz")
    run.add_argument(
        "--dtype",
        choices=["bfloat16", "float32"],
        default="bfloat16",
        help="weights dtype with --checkpoint-path (the embedded default is float32)",
    )
    cluster = parser.add_argument_group("several processes (jax.distributed; auto-detected under SLURM / Open MPI)")
    cluster.add_argument("--coordinator-address", help="HOST:PORT of process 0's coordinator")
    cluster.add_argument("--num-processes", type=int, help="processes in the job")
    cluster.add_argument("--process-id", type=int, help="this process's index, 0..num-processes-1")
    cluster.add_argument("--distributed-timeout", type=int, default=120, help="seconds to wait for peers (120)")
    models = parser.add_argument_group("models (none given: the embedded tiny random-weight default)")
    models.add_argument("--checkpoint-path", type=Path, help="an official LTX-2 .safetensors (DiT, VAEs, vocoder)")
    models.add_argument("--gemma-root", type=Path, help="Gemma 3 directory (weights + tokenizer) to encode --prompt")
    models.add_argument(
        "--prompt-cache-dir", type=Path, help="cache prompt embeddings here (keyed by prompt + weights)"
    )
    models.add_argument("--prompt-embeddings", type=Path, help=".npz with video/audio[/negative_video/negative_audio]")
    models.add_argument("--spatial-upsampler-path", type=Path, help="2x latent upsampler .safetensors")
    models.add_argument("--distilled-lora", nargs="+", metavar=("PATH", "STRENGTH"), help="stage-2 LoRA [strength]")
    models.add_argument(
        "--shard-weights",
        action="store_true",
        help="split the DiT's weights over the mesh (FSDP: a process reads only its slices), not a copy per device",
    )
    gen = parser.add_argument_group("generation")
    gen.add_argument("--pipeline", choices=["one-stage", "two-stage", "distilled"], default="one-stage")
    gen.add_argument("--prompt", default="A red fox trots through fresh snow at dawn, birds singing.")
    gen.add_argument("--negative-prompt", default=NEGATIVE_PROMPT)
    gen.add_argument("--height", type=int, help="pixels (default 512; embedded 128)")
    gen.add_argument("--width", type=int, help="pixels (default 768; embedded 192)")
    gen.add_argument("--num-frames", type=int, help="8k+1 frames (default 121; embedded 25)")
    gen.add_argument("--frame-rate", type=float, default=24.0, help="fps (default 24)")
    gen.add_argument("--num-inference-steps", type=int, help="steps (default 30 on 2.3, 40 on 2.0; embedded 8)")
    gen.add_argument("--seed", type=int, default=10, help="random seed (default 10)")
    gen.add_argument(
        "--image", nargs=3, action="append", default=[], metavar=("PATH", "FRAME_IDX", "STRENGTH"), help="condition"
    )
    guidance_flags(parser, "video", 3.0, "a2v")
    guidance_flags(parser, "audio", 7.0, "v2a")
    return parser.parse_args(argv)


def cluster_size(args: argparse.Namespace) -> int:
    """Processes in this job: the flags, else SLURM's or Open MPI's environment, else 1."""
    if args.num_processes is not None:
        return args.num_processes
    for variable in ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"):
        if os.environ.get(variable, "1").isdigit() and int(os.environ.get(variable, "1")) > 1:
            return int(os.environ[variable])
    return 1


def wait_for_coordinator(address: str, timeout_s: float) -> None:
    """Polls the coordinator's TCP port until it accepts a connection or `timeout_s` passes."""
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=1.0):
                return
        except OSError as error:
            if time.monotonic() > deadline:
                sys.exit(
                    f"error: could not join the cluster at {address} within {timeout_s:g} s ({error}). Start process 0 "
                    "(it hosts the coordinator) and give every process the same --coordinator-address."
                )
            time.sleep(0.25)


def join_cluster(jax: ModuleType, args: argparse.Namespace, cpu: bool) -> None:
    """`jax.distributed.initialize` with the flags (None: JAX's own SLURM / Open MPI detection), bounded."""
    if cpu:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if args.coordinator_address and args.process_id:
        # JAX aborts the whole process (no Python exception) when the coordinator never answers.
        wait_for_coordinator(args.coordinator_address, args.distributed_timeout)
    try:
        jax.distributed.initialize(
            args.coordinator_address,
            args.num_processes,
            args.process_id,
            initialization_timeout=args.distributed_timeout,
        )
    except Exception as error:  # noqa: BLE001 - JAX raises several types; all mean "no cluster"
        where = args.coordinator_address or "the address JAX detected"
        sys.exit(
            f"error: could not join the cluster at {where} within {args.distributed_timeout} s ({error}). Start "
            "every process with the same --coordinator-address and --num-processes and distinct --process-id."
        )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    processes = cluster_size(args)
    if args.mesh % processes:
        sys.exit(
            f"error: --mesh {args.mesh} must be a multiple of the {processes} processes (each brings its devices)."
        )
    cpu = simulate_cpu_devices_if_needed(args.mesh // processes, args.cpu)  # before JAX initializes its backends
    import jax  # noqa: PLC0415 - imported after the device setup

    from ltx_jax.pipeline import generate_cli  # noqa: PLC0415

    if processes > 1 or args.coordinator_address:
        join_cluster(jax, args, cpu)

    start = time.perf_counter()
    print(f"devices: {jax.device_count()} x {jax.devices()[0].device_kind} ({jax.default_backend()})")
    try:
        info = generate_cli.run(args)
    except (ValueError, FileNotFoundError) as error:
        sys.exit(f"error: {error}")
    info["total_s"] = time.perf_counter() - start
    print(generate_cli.format_summary(info))


if __name__ == "__main__":
    main()
