"""Serve LTX-2 over HTTP: one pipeline, loaded and compiled once, behind an OpenAI-style video API and a web page.

    ltx-jax serve                                # the embedded tiny random-weight model, on http://127.0.0.1:8000
    ltx-jax serve --mesh 8 --pipeline distilled --transformer-path ... --text-encoder-path ... --port 8000
    curl -s localhost:8000/v1/videos -H 'Content-Type: application/json' -d '{"prompt": "A fox", "size": "768x512"}'

The model and mesh flags are `ltx-jax generate`'s. At start the pipeline generates once at each --compile-size, so
requests of those sizes find their programs compiled; then one thread runs the jobs one at a time. Requests are
checked as `generate` checks its flags (a bad field is a 400 naming it), then against the --max-* limits. Jobs and
their videos live in --jobs-dir and outlive a restart. Binds 127.0.0.1 unless --host says otherwise; with an API
key (--api-key, or LTX_JAX_API_KEY: other users of the machine can read a command line), every route wants it.

Several processes (`jax.distributed`, the cluster flags of `generate`, every process given the same flags but
--process-id, --host, --port, --jobs-dir, --api-key): process 0 serves and queues, every process runs each job on the
mesh (ltx_jax/serve/peers.py). Stop the server by stopping process 0 (SIGINT, SIGTERM): it stops the others.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import logging
import os
import re
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ltx_jax.cli.generate import reporting_errors
from ltx_jax.cli.model_flags import (
    check_compile_cache,
    checkpoint_files,
    cluster_flags,
    devices_and_cluster,
    flow_flag,
    mesh_and_runtime,
    mesh_flags,
    model_flags,
    positive_int,
    use_compile_cache,
)
from ltx_jax.pipeline import GenerationSettings, flows

if TYPE_CHECKING:
    from ltx_jax.pipeline.defaults import GenerationDefaults
    from ltx_jax.pipeline.model_ledger import CheckpointFiles
    from ltx_jax.serve.settings import Limits

logger = logging.getLogger("ltx_jax.serve")
KEY_VARIABLE = "LTX_JAX_API_KEY"
PROCESS_LOCAL = ("process_id", "host", "port", "jobs_dir", "api_key")  # flags only process 0 uses, or its own
_COMPILE_SIZE = re.compile(r"(\d+)x(\d+)x(\d+)")


def tcp_port(text: str) -> int:
    """An argparse type: a TCP port, 1-65535 (uvicorn would take 70000 as 70000 mod 65536)."""
    port = positive_int(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"{port} is above 65535, the largest TCP port")
    return port


def compile_size(text: str) -> tuple[int, int, int]:
    """An argparse type: WIDTHxHEIGHTxFRAMES."""
    match = _COMPILE_SIZE.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHTxFRAMES, e.g. 768x512x121")
    return int(match[1]), int(match[2]), int(match[3])


def parse_args(argv: list[str] | None = None, prog: str | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    mesh_flags(parser)
    cluster_flags(parser)
    flow_flag(model_flags(parser))
    server = parser.add_argument_group("server")
    server.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    server.add_argument("--port", type=tcp_port, default=8000, help="port, 1-65535 (default 8000)")
    server.add_argument("--jobs-dir", type=Path, default=Path("ltx-jax-jobs"), help="jobs and videos (%(default)s)")
    server.add_argument(
        "--api-key", default=os.environ.get(KEY_VARIABLE),
        help=f"the key every request must carry as 'Authorization: Bearer KEY' (default: ${KEY_VARIABLE}; none: open)",
    )  # fmt: skip
    server.add_argument("--served-model-name", help="the model id of /v1/models (default: the model file's name)")
    server.add_argument(
        "--compile-size", nargs="*", type=compile_size, metavar="WxHxF",
        help="sizes compiled at start (default: the flow's default size; none given: none)",
    )  # fmt: skip
    limits = parser.add_argument_group("limits of one request")
    limits.add_argument("--max-queue", type=positive_int, default=32, help="jobs waiting at most (default 32; 429)")
    limits.add_argument("--max-frames", type=positive_int, default=257, help="frames at most (default 257)")
    limits.add_argument(
        "--max-pixels", type=max_pixels, default=1920 * 1088, help="width x height at most: N or WxH (1920x1088)"
    )
    limits.add_argument("--max-upload-mb", type=positive_int, default=20, help="image upload, MiB at most (default 20)")
    return parser.parse_args(argv)


def max_pixels(text: str) -> int:
    """An argparse type: a pixel count, or WIDTHxHEIGHT."""
    width, _, height = text.partition("x")
    if not (width.isdigit() and (not height or height.isdigit())) or int(width) * int(height or 1) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a pixel count or WIDTHxHEIGHT, e.g. 1920x1088")
    return int(width) * int(height or 1)


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    args = parse_args(argv, prog)
    reporting_errors(args, lambda: start(args), "the server")
    return 0


def start(args: argparse.Namespace) -> None:
    """Checks the flags, sets the devices up, loads and compiles the pipeline, serves until stopped."""
    missing = [name for name in ("fastapi", "uvicorn", "multipart") if importlib.util.find_spec(name) is None]
    if missing:
        raise ModuleNotFoundError(f"ltx-jax serve needs {', '.join(missing)}: pip install 'ltx-jax[serve]'.")
    from ltx_jax.serve.settings import Limits, MiB, check_servable  # noqa: PLC0415 - after the check; no JAX backend

    check_compile_cache(args)
    check_servable(flows.get(args.pipeline))
    if args.api_key == "":
        raise ValueError(
            f"--api-key is empty (or ${KEY_VARIABLE} is set to nothing): give a key (e.g. `openssl rand -hex 16`), "
            "or leave both unset for a server without one."
        )
    limits = Limits(
        max_queue=args.max_queue, max_frames=args.max_frames, max_pixels=args.max_pixels,
        max_upload_bytes=args.max_upload_mb * MiB,
    )  # fmt: skip
    files = checkpoint_files(args)
    if files is not None:
        files.check(args.pipeline)
        if files.text_encoder() is None:
            raise ValueError("ltx-jax serve encodes each request's prompt: give --gemma-root or --text-encoder-path.")
    defaults = flows.get(args.pipeline).defaults("embedded") if files is None else files.defaults(args.pipeline)
    sizes = checked_sizes(args, defaults, limits)
    if not args.process_id:  # process 0 serves (each process, where SLURM or Open MPI number them)
        check_place(args)
    devices_and_cluster(args)  # before JAX initializes its backends
    import jax  # noqa: PLC0415 - its backends start after the device setup

    from ltx_jax.parallel.cluster import check_same_everywhere  # noqa: PLC0415

    same = {name: value for name, value in vars(args).items() if name not in PROCESS_LOCAL}
    check_same_everywhere(same, "--process-id, --host, --port, --jobs-dir and --api-key")
    use_compile_cache(args)
    log_to_stderr()
    logger.info("devices: %d x %s (%s)", jax.device_count(), jax.devices()[0].device_kind, jax.default_backend())
    serve(args, files, sizes, limits)


def log_to_stderr() -> None:
    """ltx_jax's INFO lines on stderr, and only once: importing orbax gave the root logger a handler (so
    `logging.basicConfig` would change nothing) and left it at WARNING."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s: %(message)s"))
    package = logging.getLogger("ltx_jax")
    package.addHandler(handler)
    package.setLevel(logging.INFO)
    package.propagate = False


def check_place(args: argparse.Namespace) -> None:
    """--jobs-dir is (or can be made) a writable folder and --host:--port can be bound, before minutes of loading."""
    if args.jobs_dir.exists() and not args.jobs_dir.is_dir():
        raise NotADirectoryError(f"--jobs-dir {args.jobs_dir} is a file; give a folder (created if missing).")
    args.jobs_dir.mkdir(parents=True, exist_ok=True)
    if not os.access(args.jobs_dir, os.W_OK):
        raise PermissionError(f"--jobs-dir {args.jobs_dir} is not writable; choose a folder you can write to.")
    family, kind, _, _, address = socket.getaddrinfo(args.host, args.port, type=socket.SOCK_STREAM)[0]
    with socket.socket(family, kind) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds it
        try:
            probe.bind(address)
        except OSError as error:
            raise ValueError(
                f"--host {args.host} --port {args.port} cannot be bound ({error.strerror}); choose another --port."
            ) from None


def checked_sizes(args: argparse.Namespace, defaults: GenerationDefaults, limits: Limits) -> list[tuple[int, int, int]]:
    """--compile-size's sizes (default: the flow's default size), each checked as a request of that size would be."""
    if args.compile_size is None:
        return [(defaults.width, defaults.height, defaults.num_frames)]
    for width, height, frames in args.compile_size:
        try:
            GenerationSettings(height=height, width=width, num_frames=frames).resolve(defaults, args.pipeline)
        except ValueError as error:
            raise ValueError(f"--compile-size {width}x{height}x{frames}: {error}") from None
        if width * height > limits.max_pixels or frames > limits.max_frames:
            raise ValueError(
                f"--compile-size {width}x{height}x{frames} is above --max-pixels {limits.max_pixels} or --max-frames "
                f"{limits.max_frames}: no request could have it."
            )
    return list(args.compile_size)


def serve(
    args: argparse.Namespace, files: CheckpointFiles | None, sizes: list[tuple[int, int, int]], limits: Limits
) -> None:
    """Loads the pipeline, compiles `sizes`, serves until uvicorn is stopped (SIGINT, SIGTERM)."""
    import jax  # noqa: PLC0415
    import uvicorn  # noqa: PLC0415

    from ltx_jax.pipeline import LTXPipeline  # noqa: PLC0415
    from ltx_jax.serve import Server, create_app  # noqa: PLC0415
    from ltx_jax.serve.peers import Leader, follow  # noqa: PLC0415
    from ltx_jax.serve.settings import Served, checker  # noqa: PLC0415
    from ltx_jax.serve.worker import compile_sizes  # noqa: PLC0415

    mesh, runtime = mesh_and_runtime(args)
    if files is None:
        pipeline = LTXPipeline.embedded(flow=args.pipeline, mesh=mesh, **dataclasses.asdict(runtime))
    else:
        pipeline = LTXPipeline.from_files(files, flow=args.pipeline, mesh=mesh, runtime=runtime)
    logger.info("%s, %s flow, mesh of %d", pipeline.description, args.pipeline, mesh.size)
    compile_sizes(pipeline, sizes)  # on every process: each compiles the programs it runs
    model = args.served_model_name or model_name(args)
    if jax.process_index() > 0:
        logger.info("process %d of %d: running process 0's jobs", jax.process_index(), jax.process_count())
        follow(pipeline, checker(Served(model, pipeline.flow, pipeline.defaults), limits))
        return
    peers = Leader() if jax.process_count() > 1 else None
    server = Server.of(pipeline, args.jobs_dir, model=model, limits=limits, api_key=args.api_key, peers=peers)
    logger.info("serving %s on http://%s:%d (jobs in %s)", model, args.host, args.port, args.jobs_dir)
    with contextlib.nullcontext() if peers is None else stop_signals_noted():
        uvicorn.run(create_app(server), host=args.host, port=args.port, log_level="info")


@contextlib.contextmanager
def stop_signals_noted() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM do nothing but be noted. uvicorn stops on them, then raises the signal it
    stopped on again, which by default ends the process there; under `jax.distributed` that would skip JAX's shutdown
    barrier, where the other processes (told to stop by the worker) wait for process 0, the coordinator: they would
    die of its loss. Noted instead, process 0 ends through that barrier with the others (`exit_now`), status 0."""

    def note(signum: int, _: object) -> None:
        logger.info("stopped by %s", signal.Signals(signum).name)

    previous = {signum: signal.signal(signum, note) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def model_name(args: argparse.Namespace) -> str:
    """The model file's name (a converted directory's, the transformer file's), or the embedded model's."""
    path = args.checkpoint_path or args.transformer_path
    return "ltx-jax-embedded" if path is None else Path(path).name.removesuffix(".safetensors")
