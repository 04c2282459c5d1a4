"""Time to a playable mp4 through `ltx-jax serve` against the same request through `LTXPipeline` (issue #51).

    python benchmarks/serve_latency.py --manifest DIR/manifest.json [--pipeline distilled] [--size 768x512x121]
        [--repeats 3] [--modes api,direct] [--out DIR]

`--manifest`: the `manifest.json` of `scripts/make_synthetic_checkpoint.py --model 2.5` (the split files). Each mode
runs in its own process, one after the other (one GPU holds one 22B transformer at a time), with the models loaded
and compiled before anything is timed:
- api: `ltx-jax serve` with the model flags and `--compile-size SIZE`; once /health answers, REPEATS times
  `POST /v1/videos/sync`, each timed from the POST to the mp4's bytes received and decoded (every frame: playable).
- direct: `LTXPipeline.from_checkpoint` and one warm-up `generate`, then REPEATS `generate(..., output_path=)`, each
  timed from the call to the written mp4 decoded the same way.
Both generate the same requests (the i-th of each mode: the same prompt, new each time, size, frames, seed; the
flow's other defaults); the server's own start compiles at SIZE, the direct mode's warm-up generates once.
Prints one line per mode (median, each time) and the ratio api / direct of the medians; writes `latency.json`
under `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROMPT = "A red fox trots through fresh snow at dawn, its breath steaming in the cold air"
TAKES = ("wide shot", "close-up", "tracking shot", "low angle", "aerial view")  # a new prompt each time: nothing cached


def prompt(i: int) -> str:
    return f"{PROMPT}, {TAKES[i % len(TAKES)]}, take {i}"


SEED = 42
SPLIT_FLAGS = {  # manifest key -> the flag of `generate` / `serve`, and LTXPipeline.from_checkpoint's keyword
    "text_encoder_path": "text_encoder_path",
    "video_vae_path": "video_vae_path",
    "audio_vae_path": "audio_vae_path",
    "spatial_upsampler_path": "spatial_upsampler_path",
}


def size(text: str) -> tuple[int, int, int]:
    try:
        width, height, frames = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--size must be WIDTHxHEIGHTxFRAMES (768x512x121), got {text!r}") from None
    return width, height, frames


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, required=True, help="make_synthetic_checkpoint.py's manifest.json")
    parser.add_argument("--pipeline", default="distilled", help="the flow (default distilled)")
    parser.add_argument("--size", type=size, default=(768, 512, 121), help="WIDTHxHEIGHTxFRAMES (768x512x121)")
    parser.add_argument("--repeats", type=int, default=3, help="timed requests per mode (3)")
    parser.add_argument("--modes", default="api,direct", help="comma-separated: api, direct (both)")
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--cpu", action="store_true", help="on the CPU: a check of the script")
    parser.add_argument("--out", type=Path, default=Path("serve_latency"))
    parser.add_argument("--mode", choices=["api", "direct"], help=argparse.SUPPRESS)  # one mode, in its process
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if not args.manifest.is_file():
        parser.error(f"--manifest {args.manifest} is not a file (make_synthetic_checkpoint.py writes manifest.json)")
    modes = args.modes.split(",")
    if not modes or any(mode not in ("api", "direct") for mode in modes):
        parser.error(f"--modes must name api and/or direct, got {args.modes!r}")
    return args


def files(manifest: Path, pipeline: str) -> dict[str, str]:
    """LTXPipeline.from_checkpoint's file keywords, from the manifest: the distilled transformer for the distilled
    flow, the dev one (and its distilled LoRA, which stage 2 takes) for the others."""
    listed = json.loads(manifest.read_text())
    chosen = {keyword: listed[key] for key, keyword in SPLIT_FLAGS.items()}
    if pipeline == "distilled":
        return {**chosen, "transformer_path": listed["distilled_transformer_path"]}
    return {**chosen, "transformer_path": listed["transformer_path"], "distilled_lora": listed["distilled_lora"]}


def playable_frames(mp4: bytes) -> int:
    """The frames PyAV decodes from the mp4 (all of them: what a player shows)."""
    import io  # noqa: PLC0415

    import av  # noqa: PLC0415

    with av.open(io.BytesIO(mp4)) as container:
        return sum(1 for _ in container.decode(video=0))


def run_api(args: argparse.Namespace, folder: Path) -> list[float]:
    import httpx  # noqa: PLC0415

    width, height, frames = args.size
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in files(args.manifest, args.pipeline).items()]
    command = [
        sys.executable, "-c", "from ltx_jax.cli import console_main; console_main()", "serve",
        "--pipeline", args.pipeline, "--mesh", "1", *flags, "--port", str(args.port),
        "--jobs-dir", str(folder / "jobs"),
        "--compile-size", f"{width}x{height}x{frames}", *(["--cpu"] if args.cpu else []),
    ]  # fmt: skip
    log = folder / "serve.log"
    with log.open("w") as output:
        server = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    times = []
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{args.port}", timeout=600) as http:
            _wait_until_up(http, server, log)
            for i in range(args.repeats):
                request = {"prompt": prompt(i), "size": f"{width}x{height}", "num_frames": frames, "seed": SEED}
                start = time.perf_counter()
                reply = http.post("/v1/videos/sync", json=request)
                if reply.status_code != 200:
                    raise RuntimeError(f"POST /v1/videos/sync: {reply.status_code} {reply.text[:2000]}")
                if playable_frames(reply.content) != frames:
                    raise RuntimeError(f"the mp4 does not hold {frames} frames")
                times.append(time.perf_counter() - start)
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:  # never leave it holding the GPU for the next mode
            server.kill()
            server.wait()
        sys.stderr.write(log.read_text()[-6000:])
    return times


def _wait_until_up(http: object, server: subprocess.Popen, log: Path, timeout_s: float = 540) -> None:
    import httpx  # noqa: PLC0415

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if http.get("/health").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the server did not come up:\n{log.read_text()[-5000:]}")
        time.sleep(0.5)


def run_direct(args: argparse.Namespace, folder: Path) -> list[float]:
    from ltx_jax.parallel import make_mesh  # noqa: PLC0415
    from ltx_jax.pipeline import GenerationSettings, LTXPipeline  # noqa: PLC0415

    width, height, frames = args.size
    if args.cpu:
        import jax  # noqa: PLC0415

        jax.config.update("jax_platforms", "cpu")
    pipe = LTXPipeline.from_checkpoint(flow=args.pipeline, mesh=make_mesh(1), **files(args.manifest, args.pipeline))
    settings = GenerationSettings(height=height, width=width, num_frames=frames, seed=SEED)
    pipe.generate(prompt(-1), settings, output_path=folder / "warm-up.mp4")
    times = []
    for i in range(args.repeats):
        path = folder / f"direct-{i}.mp4"
        start = time.perf_counter()
        pipe.generate(prompt(i), settings, output_path=path)
        if playable_frames(path.read_bytes()) != frames:
            raise RuntimeError(f"the mp4 does not hold {frames} frames")
        times.append(time.perf_counter() - start)
    return times


def one_mode(args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"serve-latency-{args.mode}-") as folder:
        times = (run_api if args.mode == "api" else run_direct)(args, Path(folder))
    (args.out / f"{args.mode}.json").write_text(json.dumps({"times_s": times}))


def main() -> None:
    args = parse_args()
    if args.mode:
        one_mode(args)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    results = {}
    for mode in args.modes.split(","):
        command = [sys.executable, __file__, *sys.argv[1:], "--mode", mode]
        code = subprocess.run(command, env=dict(os.environ), check=False).returncode
        if code != 0:
            print(f"{mode}: failed (exit {code})")
            continue
        times = json.loads((args.out / f"{mode}.json").read_text())["times_s"]
        results[mode] = {"median_s": statistics.median(times), "times_s": times}
        print(f"{mode}: median {statistics.median(times):.2f} s ({', '.join(f'{t:.2f}' for t in times)})")
    if len(results) == 2:
        ratio = results["api"]["median_s"] / results["direct"]["median_s"]
        results["api_over_direct"] = ratio
        print(f"api / direct: {ratio:.3f}")
    width, height, frames = args.size
    summary = {"pipeline": args.pipeline, "size": f"{width}x{height}x{frames}", "prompt": prompt(0), "seed": SEED}
    (args.out / "latency.json").write_text(json.dumps({**summary, **results}, indent=1))


if __name__ == "__main__":
    main()
