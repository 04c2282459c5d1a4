"""Several processes on one mesh: how many, joining `jax.distributed` within a bounded time, checking that
every process runs the same request, and ending a process without waiting for stuck peers."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
import sys
import time
from collections.abc import Mapping

import jax
import numpy as np
from jax.experimental import multihost_utils

from ltx_jax.interrupts import stop_together


class ClusterError(ConnectionError):
    """This process could not join the others in time."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cluster:
    """How this process joins the others.

    Attributes:
        coordinator_address: HOST:PORT of process 0's coordinator (None: JAX's SLURM / Open MPI detection).
        num_processes: processes in the job (None: SLURM's or Open MPI's environment, else 1).
        process_id: this process's index, 0..num_processes-1.
        timeout_s: how long to wait for the peers.
    """

    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    timeout_s: float = 120

    def size(self) -> int:
        """Processes in this job: `num_processes`, else SLURM's or Open MPI's environment, else 1."""
        if self.num_processes is not None:
            return self.num_processes
        for variable in ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"):
            if os.environ.get(variable, "1").isdigit() and int(os.environ.get(variable, "1")) > 1:
                return int(os.environ[variable])
        return 1

    def join(self, cpu: bool) -> None:
        """`jax.distributed.initialize`, bounded by `timeout_s` (`cpu`: the devices are CPUs, whose
        collectives go through gloo); raises `ClusterError`. From then on a stop signal to one process
        stops every process at the next check (`ltx_jax.interrupts.check_stop`)."""
        if cpu:
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
        where = self.coordinator_address or "the address JAX detected"
        fix = "Start process 0 (it hosts the coordinator) and give every process the same --coordinator-address"
        if self.coordinator_address and self.process_id:
            # JAX aborts the whole process (no Python exception) when the coordinator never answers.
            _wait_for_coordinator(self.coordinator_address, self.timeout_s, fix)
        try:
            jax.distributed.initialize(
                self.coordinator_address, self.num_processes, self.process_id, initialization_timeout=self.timeout_s
            )
        except Exception as error:  # noqa: BLE001 - JAX raises several types; all mean "no cluster"
            raise ClusterError(
                f"could not join the cluster at {where} within {self.timeout_s:g} s ({error}). {fix}, the same "
                "--num-processes and distinct --process-id."
            ) from None
        stop_together(_gather_signals)  # one process stopping alone would leave the others waiting in a collective


def check_same_everywhere(
    arguments: Mapping[str, object], may_differ: str = "--process-id and the output paths"
) -> None:
    """In a multi-process run every process must be given the same `arguments` (what shapes the result);
    raises `ValueError` where they differ, naming the flags that `may_differ`."""
    if jax.process_count() == 1:
        return
    text = json.dumps({name: str(value) for name, value in sorted(arguments.items())})
    digest = np.frombuffer(hashlib.sha256(text.encode()).digest()[:8], np.int32)
    try:
        multihost_utils.assert_equal(digest)
    except AssertionError:
        raise ValueError(
            "the processes were given different generation arguments: start every process with the same flags "
            f"(only {may_differ} may differ)."
        ) from None


def leave(status: int) -> None:
    """Ends the process with `status`. A process of a cluster ends at once (its cleanup has run as the
    exception unwound): JAX's exit handler would wait at a shutdown barrier, up to 5 minutes and then
    abort, for peers that a stopped or failed process leaves stuck, and those peers end only once their
    collectives see it gone."""
    if jax.distributed.is_initialized():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)


def _wait_for_coordinator(address: str, timeout_s: float, fix: str) -> None:
    """Polls the coordinator's TCP port until it accepts a connection; raises `ClusterError` after `timeout_s`."""
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=1.0):
                return
        except OSError as error:
            if time.monotonic() > deadline:
                message = f"could not join the cluster at {address} within {timeout_s:g} s ({error}). {fix}."
                raise ClusterError(message) from None
            time.sleep(0.25)


def _gather_signals(signum: int) -> list[int]:
    """Every process's pending signal number (0: none), this process's given."""
    return np.asarray(multihost_utils.process_allgather(np.int32(signum))).reshape(-1).tolist()
