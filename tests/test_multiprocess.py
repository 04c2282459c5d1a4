"""Two real processes x 4 CPU devices joined by jax.distributed form one 8-device mesh; SP on it
equals the single-process single-device model."""

import os
import sys

import numpy as np
import pytest
from flax import nnx
from ltx_core_twin import relative_error
from multiprocess_case import build_case, free_port, run_processes

SP_TOLERANCE = 1e-5  # DESIGN.md: SP equals the single-device model in float32
HERE = os.path.dirname(os.path.abspath(__file__))


def run_two_processes(out_dir: str, model_type: str, tokens: int) -> None:
    command = [sys.executable, os.path.join(HERE, "multiprocess_worker.py"), str(free_port())]
    run_processes([[*command, str(i), out_dir, model_type, str(tokens)] for i in range(2)])


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


GENERATE = [sys.executable, os.path.join(HERE, os.pardir, "scripts", "generate.py")]
SMALL = ["--mesh", "8", "--cpu", "--num-inference-steps", "3", "--num-frames", "9", "--height", "64", "--width", "96"]


def cluster_flags(port: int, process: int) -> list[str]:
    return ["--coordinator-address", f"127.0.0.1:{port}", "--num-processes", "2", "--process-id", str(process)]


def test_generation_on_two_processes_equals_one_process(tmp_path):
    """scripts/generate.py as 2 processes x 4 devices: process 0 writes the mp4, process 1 nothing, and the
    latents equal a single-process single-device run with the same seed."""
    port = free_port()
    run_processes(
        [
            [*GENERATE, *SMALL, *cluster_flags(port, i), "--output-path", str(tmp_path / f"out{i}.mp4"),
             "--save-latents", str(tmp_path / f"latents{i}.npz")]
            for i in range(2)
        ]
    )  # fmt: skip
    assert (tmp_path / "out0.mp4").exists()
    assert (tmp_path / "latents0.npz").exists()
    assert not (tmp_path / "out1.mp4").exists()
    assert not (tmp_path / "latents1.npz").exists()
    single = [*GENERATE, *SMALL[2:], "--mesh", "1", "--output-path", str(tmp_path / "single.mp4")]
    run_processes([[*single, "--save-latents", str(tmp_path / "single.npz")]])
    ours, reference = np.load(tmp_path / "latents0.npz"), np.load(tmp_path / "single.npz")
    for stream in ("video", "audio"):
        assert relative_error(ours[stream], reference[stream]) <= SP_TOLERANCE


def test_processes_with_different_arguments_refuse_to_run(tmp_path):
    port = free_port()
    outputs = run_processes(
        [[*GENERATE, *SMALL, *cluster_flags(port, i), "--seed", str(i), "--output-path", str(tmp_path / f"{i}.mp4")]
         for i in range(2)],
        expect_success=False,
    )  # fmt: skip
    assert all("different generation arguments" in output for output in outputs)
    assert not list(tmp_path.iterdir())


def test_unreachable_coordinator_fails_in_bounded_time(tmp_path):
    port = free_port()
    flags = [*cluster_flags(port, 1), "--distributed-timeout", "5", "--output-path", str(tmp_path / "x.mp4")]
    (output,) = run_processes([[*GENERATE, *SMALL, *flags]], expect_success=False)
    assert f"could not join the cluster at 127.0.0.1:{port} within 5 s" in output
