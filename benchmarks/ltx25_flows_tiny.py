"""Every flow of `scripts/generate.py --mesh 8` on tiny synthetic LTX-2.5 split files, each in its own process as a
user runs it; prints a table of exit status, seconds and the written video's frames and size.

    python benchmarks/ltx25_flows_tiny.py [--files DIR] [--flows one-stage distilled ...] [--video-vae diffusion]

Without --files it writes the files first (`make_synthetic_checkpoint.py --model 2.5 --tiny --layers 2
--gemma-layers 2` into a temporary folder). The inputs the flows need (an image, a reference video, a source
video with audio, a tone) are made here. On a CPU the devices are 8 simulated ones. Pictures are noise: the point
is that each flow loads LTX-2.5's files and writes its mp4.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import av
import numpy as np
from PIL import Image

from ltx_jax.pipeline import write_mp4

ROOT = pathlib.Path(__file__).resolve().parents[1]
SIZE = ["--height", "128", "--width", "128", "--num-frames", "17"]


def make_inputs(folder: pathlib.Path) -> dict[str, str]:
    """A 128x128 image and a 17-frame 128x128 video with a stereo tone at 48 kHz (24 fps)."""
    rng = np.random.default_rng(0)
    image = folder / "image.png"
    Image.fromarray(rng.integers(0, 255, (128, 128, 3), np.uint8)).save(image)
    video = folder / "source.mp4"
    tone = 0.2 * np.sin(np.arange(int(48000 * 17 / 24)) * 2 * np.pi * 440 / 48000)
    write_mp4(video, rng.integers(0, 255, (17, 128, 128, 3), np.uint8), 24.0, np.stack([tone, tone]), 48000)
    return {"image": str(image), "video": str(video)}


def flow_arguments(files: dict[str, str], inputs: dict[str, str]) -> dict[str, list[str]]:
    """Each flow's flags beyond the common ones: its transformer (dev or distilled, as 1.2.0's docs pair them)
    and what it needs."""
    dev = ["--transformer-path", files["transformer_path"]]
    distilled = ["--transformer-path", files["distilled_transformer_path"]]
    upsampler = ["--spatial-upsampler-path", files["spatial_upsampler_path"]]
    lora = ["--distilled-lora", files["distilled_lora"]]
    steps = ["--num-inference-steps", "2"]
    return {
        "one-stage": [*dev, *SIZE, *steps, "--image", inputs["image"], "0", "1.0"],
        "two-stage": [*dev, *SIZE, *steps, *upsampler, *lora],
        "two-stage-hq": [*dev, *SIZE, *steps, *upsampler, *lora],
        "distilled": [*distilled, *SIZE, *upsampler],
        "keyframe-interpolation": [*dev, *SIZE, *steps, *upsampler, *lora, "--image", inputs["image"], "0", "1.0",
                                   "--image", inputs["image"], "16", "1.0"],
        "ic-lora": [*distilled, *SIZE, *upsampler, "--lora", files["distilled_lora"], "--video-conditioning",
                    inputs["video"], "1.0"],
        "a2vid": [*dev, *SIZE, *steps, *upsampler, *lora, "--audio-path", inputs["video"]],
        "retake": [*distilled, "--video-path", inputs["video"], "--start-time", "0.2", "--end-time", "0.5"],
    }  # fmt: skip


def probe(path: pathlib.Path) -> str:
    with av.open(str(path)) as container:
        frames = sum(1 for _ in container.decode(video=0))
        stream = container.streams.video[0]
        return f"{frames} x {stream.height}x{stream.width}, audio {len(container.streams.audio) > 0}"


def run_flow(flow: str, flags: list[str], files: dict[str, str], out: pathlib.Path) -> tuple[int, float, str]:
    common = ["--mesh", "8", "--pipeline", flow, "--text-encoder-path", files["text_encoder_path"],
              "--video-vae-path", files["video_vae_path"], "--audio-vae-path", files["audio_vae_path"],
              "--prompt", "A cow in the rain", "--output-path", str(out)]  # fmt: skip
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "scripts/generate.py", *common, *flags], cwd=ROOT, capture_output=True, text=True, check=False
    )
    seconds = time.monotonic() - start
    if result.returncode != 0:
        return result.returncode, seconds, result.stderr.strip().splitlines()[-1]
    return 0, seconds, probe(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=pathlib.Path, help="a folder make_synthetic_checkpoint.py --model 2.5 wrote")
    parser.add_argument("--flows", nargs="+", help="flows to run (default: all)")
    parser.add_argument(
        "--video-vae", choices=("conv", "diffusion"), default="conv",
        help="the video VAE file the flows decode with: the conv one (default) or the diffusion one "
        "(ltx-2.5-video-vae-bf16, the manifest's diffusion_video_vae_path)",
    )  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = pathlib.Path(scratch)
        if args.files is None:
            sys.path.insert(0, str(ROOT / "scripts"))
            import make_synthetic_checkpoint  # noqa: PLC0415

            files = make_synthetic_checkpoint.make_synthetic_checkpoint(
                folder / "files", layers=2, gemma_layers=2, tiny=True, model="2.5"
            )
        else:
            files = json.loads((args.files / "manifest.json").read_text())
        if args.video_vae == "diffusion":
            if "diffusion_video_vae_path" not in files:
                raise SystemExit(f"{args.files}: no diffusion_video_vae_path in its manifest; write the files again.")
            files = {**files, "video_vae_path": files["diffusion_video_vae_path"]}
        arguments = flow_arguments(files, make_inputs(folder))
        print("| flow | exit | seconds | output |\n|---|---|---|---|", flush=True)
        for flow in args.flows or arguments:
            status, seconds, output = run_flow(flow, arguments[flow], files, folder / f"{flow}.mp4")
            print(f"| {flow} | {status} | {seconds:.1f} | {output} |", flush=True)


if __name__ == "__main__":
    main()
