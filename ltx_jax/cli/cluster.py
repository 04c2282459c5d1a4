"""Several processes for `scripts/generate.py`: how many, joining `jax.distributed` within a bounded
time, and checking that every process was given the same arguments."""

import argparse
import hashlib
import json
import os
import socket
import sys
import time
from types import ModuleType

from ltx_jax.interrupts import stop_together


def check_same_arguments(args: argparse.Namespace) -> None:
    """In a multi-process run every process must be given the same generation arguments."""
    import jax  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

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


def leave(status: int) -> None:
    """Ends the process with `status`. A process of a cluster ends at once (its cleanup has run as the
    exception unwound): JAX's exit handler would wait at a shutdown barrier, up to 5 minutes and then
    abort, for peers that a stopped or failed process leaves stuck, and those peers end only once their
    collectives see it gone."""
    jax = sys.modules.get("jax")
    if jax is not None and jax.distributed.is_initialized():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


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
    stop_together(gather_signals)  # one process stopping alone would leave the others waiting in a collective


def gather_signals(signum: int) -> list[int]:
    """Every process's pending signal number (0: none), this process's given."""
    import numpy as np  # noqa: PLC0415
    from jax.experimental import multihost_utils  # noqa: PLC0415

    return np.asarray(multihost_utils.process_allgather(np.int32(signum))).reshape(-1).tolist()
