"""Convert an official LTX-2 safetensors checkpoint's DiT into an ltx-jax Orbax checkpoint.

    ltx-jax convert ltx-2.3-22b-dev.safetensors ckpt/ltx-2.3-dev
    ltx-jax convert SRC.safetensors OUT_DIR --dtype bfloat16 \\
        --lora ltx-2.3-22b-distilled-lora-384.safetensors:1.0 --config config.json

Only the DiT (`model.diffusion_model.*`) is converted; the text connectors, VAEs and vocoder in the
same file are reported and left to their own loaders. fp8-scaled weights are dequantized, LoRAs
fused. Memory stays near twice the largest tensor plus a 256 MB part; a failed or interrupted run
leaves no OUT_DIR. Load the result with `ltx_jax.load_checkpoint(OUT_DIR, mesh=..., dtype=...)`.
(`python scripts/convert_checkpoint.py ...` is the same command.)

One process, no --coordinator-address/--num-processes/--process-id: conversion is a host-side file
transform that uses no devices and writes one directory, so it runs once, on one host, to storage
that every process of a later multi-process run can read (see docs/multi-node.md). Launched as
several tasks (SLURM_NTASKS or OMPI_COMM_WORLD_SIZE > 1) it refuses to run rather than have every
task convert the same file.
"""

import argparse
import logging
import sys

from ltx_jax.convert.checkpoint import convert_checkpoint
from ltx_jax.convert.dit_tensors import Lora, config_from_json_file
from ltx_jax.interrupts import describe, exit_status, signals_interrupt
from ltx_jax.parallel.cluster import Cluster


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("src", help="the .safetensors checkpoint")
    parser.add_argument("out_dir", help="the directory to write (must not exist)")
    parser.add_argument("--dtype", default="bfloat16", help="bfloat16 (default), float32 or float16")
    parser.add_argument(
        "--lora",
        action="append",
        default=[],
        metavar="FILE:STRENGTH",
        help="fuse a LoRA into the weights (repeatable; strength defaults to 1.0)",
    )
    parser.add_argument("--config", metavar="JSON", help="config JSON file replacing the checkpoint's metadata config")
    args = parser.parse_args(argv)
    tasks = Cluster().size()
    if tasks > 1:
        print(
            f"error: launched as {tasks} tasks, but conversion runs as one process (every task would convert the "
            "same file into the same OUT_DIR). Run it once, e.g. `srun --ntasks=1 ltx-jax convert "
            "...`, then load OUT_DIR from every process.",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    try:
        with signals_interrupt():
            summary = convert_checkpoint(
                args.src,
                args.out_dir,
                dtype=args.dtype,
                loras=[Lora.parse(spec) for spec in args.lora],
                config=config_from_json_file(args.config) if args.config else None,
            )
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM / SIGHUP as `Terminated`; the partial directory is gone
        print(describe(interrupt, "conversion"), file=sys.stderr)
        return exit_status(interrupt)
    except (ValueError, FileNotFoundError) as error:  # a bad argument or input file
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # e.g. the disk filled up
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"{summary} -> {args.out_dir}")
    return 0
