"""The tiny model config of the multi-process loading tests (built alike in every process), and the launcher
of the multi-process tests' processes, their environment and ports."""

import os
import socket
import subprocess

from cpu_compile import CPU_COMPILE_FLAGS

import ltx_jax

TIMEOUT_S = 240
HERE = os.path.dirname(os.path.abspath(__file__))
CFG = ltx_jax.LTXConfig.tiny(
    num_attention_heads=8, attention_head_dim=8, audio_num_attention_heads=8, audio_attention_head_dim=4
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_env() -> dict[str, str]:
    """The environment of a test's child process: these helpers importable, and of XLA_FLAGS only the
    compile flags (each process sets up its own devices)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    env["XLA_FLAGS"] = CPU_COMPILE_FLAGS
    return env


def run_processes(
    commands: list[list[str]],
    expect_success: bool = True,
    *,
    extra_env: dict[str, str] | None = None,
    timeout_s: float = TIMEOUT_S,
) -> list[str]:
    """Runs the commands concurrently (bounded time, all reaped on any failure); returns their output."""
    env = {**process_env(), **(extra_env or {})}
    procs = [
        subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for command in commands
    ]
    try:
        outputs = [p.communicate(timeout=timeout_s)[0] for p in procs]
    finally:
        for p in procs:  # reaped on any failure, including the timeout
            p.kill()
            p.wait()
    for i, (p, output) in enumerate(zip(procs, outputs, strict=True)):
        if expect_success:
            assert p.returncode == 0, f"process {i} exited with {p.returncode}:\n{output[-3000:]}"
        else:
            assert p.returncode != 0, f"process {i} succeeded:\n{output[-3000:]}"
    return outputs
