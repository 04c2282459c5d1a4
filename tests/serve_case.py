"""What the tests of `ltx-jax serve` share: the small request, polling a job to its end, reading an mp4, and the
real command started on a free port (tests/test_serve.py, tests/serve_browser.py, tests/serve_load.py and the
two-process test in tests/test_multiprocess.py)."""

import io
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import av
import httpx

MODEL = "ltx-jax-embedded"
SMALL = {"prompt": "a red fox", "size": "64x64", "num_frames": 9, "num_inference_steps": 2}
LONG = {**SMALL, "num_inference_steps": 400}  # seconds of denoising: time to act while it runs
WAIT_S = 120  # for a job to finish, or the command to start
POLL_S = 0.02
FINISHED = ("completed", "failed", "cancelled")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def polled(client: httpx.Client, job_id: str, done: Callable[[dict], bool], headers: dict | None = None) -> dict:
    """The job once `done(job)`, polled (`client`: an httpx client or Starlette's TestClient)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        job = client.get(f"/v1/videos/{job_id}", headers=headers).json()
        if done(job):
            return job
        time.sleep(POLL_S)
    raise AssertionError(f"job {job_id} is still {job['status']} after {WAIT_S} s")


def finished(client: httpx.Client, job_id: str, headers: dict | None = None) -> dict:
    return polled(client, job_id, lambda job: job["status"] in FINISHED, headers)


def frames_of(mp4: bytes) -> tuple[int, int, int]:
    """(frames, height, width) of an mp4's video."""
    with av.open(io.BytesIO(mp4)) as container:
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    return len(frames), *frames[0].shape[:2]


def command_line(port: int, jobs: Path, *flags: str) -> list[str]:
    """`ltx-jax serve` on 127.0.0.1:`port` with its jobs in `jobs`, on the CPU."""
    command = [str(Path(sys.executable).with_name("ltx-jax")), "serve", "--cpu", "--port", str(port)]
    return [*command, "--jobs-dir", str(jobs), *flags]


def start_server(command: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`command` in the background, its output in `log`."""
    with log.open("w") as output:
        return subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)


def up(http: httpx.Client) -> bool:
    try:
        return http.get("/health").status_code == 200
    except httpx.TransportError:
        return False


def wait_until_up(http: httpx.Client, server: subprocess.Popen, log: Path, timeout_s: float = WAIT_S) -> None:
    """Until the command answers /health: it loads and compiles first; a command that ends fails with its log."""
    deadline = time.monotonic() + timeout_s
    while not up(http):
        assert server.poll() is None, log.read_text()[-5000:]
        assert time.monotonic() < deadline, f"not up after {timeout_s} s:\n{log.read_text()[-5000:]}"
        time.sleep(0.5)


def stop_server(server: subprocess.Popen, timeout_s: float = WAIT_S) -> int:
    """SIGTERM (uvicorn's graceful shutdown), then its exit status; killed if it does not end in `timeout_s`."""
    server.terminate()
    try:
        return server.wait(timeout_s)
    finally:
        server.kill()
        server.wait()
