"""Two real processes x 4 CPU devices joined by jax.distributed form one 8-device mesh; SP on it
equals the single-process single-device model."""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from flax import nnx
from ltx_core_twin import relative_error
from multiprocess_case import TIMEOUT_S, build_case, free_port, process_env, run_processes
from tolerances import SP

from ltx_jax.cli import generate

HERE = os.path.dirname(os.path.abspath(__file__))


def run_two_processes(out_dir: str, model_type: str, tokens: int) -> None:
    command = [sys.executable, os.path.join(HERE, "multiprocess_worker.py"), str(free_port())]
    run_processes([[*command, str(i), out_dir, model_type, str(tokens)] for i in range(2)])


@pytest.mark.parametrize(("model_type", "tokens"), [("av", 50)])  # video-only SP: tests/test_sequence_parallel.py
def test_two_processes_equal_single_device(tmp_path, model_type, tokens):
    run_two_processes(str(tmp_path), model_type, tokens)
    model, video, audio = build_case(model_type, tokens)
    reference = nnx.jit(lambda m, v, a: m(v, a))(model, video, audio)
    for i in range(2):
        result = np.load(tmp_path / f"process{i}.npz")
        assert relative_error(result["video"], np.asarray(reference[0])) <= SP
        if audio is not None:
            assert relative_error(result["audio"], np.asarray(reference[1])) <= SP


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
    # the single-process single-device run in this process: the same command line, a process of its own adds nothing
    single = [*SMALL[2:], "--mesh", "1", "--output-path", str(tmp_path / "single.mp4")]
    generate.run(generate.parse_args([*single, "--save-latents", str(tmp_path / "single.npz")]))
    ours, reference = np.load(tmp_path / "latents0.npz"), np.load(tmp_path / "single.npz")
    for stream in ("video", "audio"):
        assert relative_error(ours[stream], reference[stream]) <= SP


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


@pytest.mark.parametrize(("signum", "victim"), [(signal.SIGTERM, 1), (signal.SIGINT, 0)], ids=["SIGTERM-1", "SIGINT-0"])
def test_a_signal_to_one_process_stops_every_process_with_one_line(tmp_path, signum, victim):
    """The signalled process does not leave alone (its peer would wait for it inside a collective until
    JAX's heartbeat timeout aborts it): at the next DiT forward both stop, each with the one line and
    128 + the signal, and no mp4 is written. JAX's own SIGTERM handler (preemption) is overridden."""
    port, env = free_port(), process_env()
    long_run = [*SMALL[:4], "400", *SMALL[5:]]  # --num-inference-steps 400: still denoising when the signal lands
    procs = [
        subprocess.Popen(
            [*GENERATE, *long_run, *cluster_flags(port, i), "--output-path", str(tmp_path / f"{i}.mp4")],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        for i in range(2)
    ]
    errors: list[list[str]] = [[], []]
    for process, lines in zip(procs, errors, strict=True):
        threading.Thread(target=lambda p=process, out=lines: out.extend(p.stderr), daemon=True).start()
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not any("denoising:" in line for line in errors[victim]):
            assert procs[victim].poll() is None, "".join(errors[victim])[-3000:]
            assert time.monotonic() < deadline, "no denoising within the time limit"
            time.sleep(0.1)
        procs[victim].send_signal(signum)
        for process in procs:
            process.wait(timeout=60)  # a peer left waiting would be killed by the heartbeat only after 100 s
    finally:
        for process in procs:
            process.kill()
    expected = f"interrupted by {signal.Signals(signum).name}: generation stopped; no partial output was left."
    for process, lines in zip(procs, errors, strict=True):
        assert process.returncode == 128 + signum, "".join(lines)[-3000:]
        assert "".join(lines).strip().splitlines()[-1] == expected
        assert not any("Traceback" in line for line in lines)
    assert list(tmp_path.iterdir()) == []
