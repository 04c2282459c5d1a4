"""Two real processes x 4 CPU devices joined by jax.distributed form one 8-device mesh; SP on it
equals the single-process single-device model."""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest
from flax import nnx
from ltx_core_twin import relative_error
from multiprocess_case import build_case

SP_TOLERANCE = 1e-5  # DESIGN.md: SP equals the single-device model in float32
TIMEOUT_S = 240
HERE = os.path.dirname(os.path.abspath(__file__))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_two_processes(out_dir: str, model_type: str, tokens: int) -> None:
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, os.path.join(HERE, "multiprocess_worker.py"), str(port)]
    procs = [
        subprocess.Popen(
            [*command, str(i), out_dir, model_type, str(tokens)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    try:
        outputs = [p.communicate(timeout=TIMEOUT_S)[0] for p in procs]
    finally:
        for p in procs:  # reaped on any failure, including the timeout
            p.kill()
            p.wait()
    for i, (p, output) in enumerate(zip(procs, outputs, strict=True)):
        assert p.returncode == 0, f"process {i} exited with {p.returncode}:\n{output[-3000:]}"


@pytest.mark.parametrize(("model_type", "tokens"), [("av", 50), ("video", 121)])
def test_two_processes_equal_single_device(tmp_path, model_type, tokens):
    run_two_processes(str(tmp_path), model_type, tokens)
    model, video, audio = build_case(model_type, tokens)
    reference = nnx.jit(lambda m, v, a: m(v, a))(model, video, audio)
    for i in range(2):
        result = np.load(tmp_path / f"process{i}.npz")
        assert relative_error(result["video"], np.asarray(reference[0])) <= SP_TOLERANCE
        if audio is not None:
            assert relative_error(result["audio"], np.asarray(reference[1])) <= SP_TOLERANCE
