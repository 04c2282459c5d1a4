"""Time to video: ltx-pipelines 1.0.0 against scripts/generate.py on the same files and GPU, each in its own
process, phase by phase, with peak GPU memory.

    python scripts/make_synthetic_checkpoint.py /data/synth
    python benchmarks/bench_generate.py /data/synth/manifest.json --flow two-stage [--height 1024 --width 1536]
        [--num-frames 121] [--runs reference cold warm] [--cache-dir DIR] [--timeline]

`cold` runs generate.py with an empty compilation cache (`--cache-dir`, emptied first), `warm` again with the
cache the cold run filled. The reference's phases are measured by wrapping its pipeline module's functions
(prompt encoding with Gemma's building, each denoising stage, upsampling, model building through its
ModelLedger, video decoding with the mp4 writing, which it interleaves); ltx-jax's come from generate.py's
own summary. Peak memory: torch's `max_memory_reserved`, and XLA's `peak_bytes_in_use`. With `--timeline`,
generate.py runs under `benchmarks/generate_timeline.py`, its samples in `OUT_DIR/FLOW-RUN.timeline.json`.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_MODULES = {"two-stage": "ltx_pipelines.ti2vid_two_stages", "distilled": "ltx_pipelines.distilled"}

# Runs the reference's main() with its pipeline module's steps wrapped in timers (the reference builds its
# models inside the call, through ModelLedger, so building is timed separately and inside the other phases).
REFERENCE_CHILD = """
import collections, importlib, sys, time
import torch
from ltx_pipelines.utils import ModelLedger
module = importlib.import_module(sys.argv[1])
sys.argv = [sys.argv[1], *sys.argv[2:]]
totals = collections.defaultdict(float)
sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
def timed(name, fn):
    def wrapper(*args, **kwargs):
        sync()
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        sync()
        label = name
        if name == "denoising":
            totals["denoising stages"] += 1
            label = f"stage {int(totals['denoising stages'])} denoising"
        totals[label] += time.perf_counter() - start
        return out
    return wrapper
for name, label in [("encode_prompts", "prompt encoding (building Gemma too)"), ("denoise_audio_video", "denoising"),
                    ("upsample_video", "upsampling"), ("vae_decode_audio", "audio decoding"),
                    ("encode_video", "video decoding + mp4 writing")]:
    if hasattr(module, name):
        setattr(module, name, timed(label, getattr(module, name)))
for name in ("transformer", "video_encoder", "video_decoder", "audio_decoder", "vocoder", "spatial_upsampler",
             "text_encoder"):
    setattr(ModelLedger, name, timed("model building (inside the other phases)", getattr(ModelLedger, name)))
start = time.perf_counter()
module.main()
totals["total"] = time.perf_counter() - start
totals.pop("denoising stages", None)
for name, seconds in totals.items():
    print(f"PHASE {name}: {seconds:.1f} s")
if torch.cuda.is_available():
    print(f"PHASE peak GPU memory: {torch.cuda.max_memory_reserved() / 2**30:.1f} GiB")
"""


def reference_command(flow: str, files: dict, args: argparse.Namespace, out: Path) -> list[str]:
    checkpoint = ["--distilled-checkpoint-path" if flow == "distilled" else "--checkpoint-path", files["checkpoint"]]
    lora = ["--distilled-lora", files["distilled_lora"], "1.0"] if flow == "two-stage" else []
    return [sys.executable, "-c", REFERENCE_CHILD, REFERENCE_MODULES[flow], *checkpoint, *lora,
            "--gemma-root", files["gemma_root"], "--spatial-upsampler-path", files["spatial_upsampler"],
            *size_flags(args), "--prompt", args.prompt, "--output-path", str(out)]  # fmt: skip


def generate_command(flow: str, files: dict, args: argparse.Namespace, out: Path) -> list[str]:
    lora = ["--distilled-lora", files["distilled_lora"], "1.0"] if flow == "two-stage" else []
    script = [str(ROOT / "scripts" / "generate.py")]
    if args.timeline:  # sampled every 50 ms: each sample holds the GIL briefly
        timeline = out.with_name(f"{out.stem}.timeline.json")
        script = [str(ROOT / "benchmarks" / "generate_timeline.py"), str(timeline), "--interval", "0.05", "--"]
    return [sys.executable, *script, "--mesh", "1", "--pipeline", flow,
            "--checkpoint-path", files["checkpoint"], *lora, "--gemma-root", files["gemma_root"],
            "--spatial-upsampler-path", files["spatial_upsampler"], *size_flags(args), "--prompt", args.prompt,
            "--compile-cache-dir", str(args.cache_dir), "--quantization", args.quantization,
            "--output-path", str(out)]  # fmt: skip


def size_flags(args: argparse.Namespace) -> list[str]:
    return ["--height", str(args.height), "--width", str(args.width), "--num-frames", str(args.num_frames)]


def run(command: list[str], log: Path) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    seconds = time.perf_counter() - start
    log.write_text(f"$ {' '.join(command)}\n{result.stdout}\n--- stderr ---\n{result.stderr}")
    if result.returncode != 0:
        raise RuntimeError(f"{command[:4]} failed ({result.returncode}); see {log}:\n{result.stderr[-3000:]}")
    return seconds, result.stdout


def generate_phases(stdout: str) -> list[tuple[str, str]]:
    """The phases of generate.py's summary."""
    rows = []
    for label, pattern in (("loading", r"loading: ([\d.]+ s)"), ("prompt encoding", r"prompts encoded in ([\d.]+ s)"),
                           ("peak GPU memory", r"memory: peak (.*)")):  # fmt: skip
        match = re.search(pattern, stdout)
        rows.append((label, match[1] if match else "?"))
    rows += [(f"DiT forward, {m[1]} video tokens", f"{m[2]} x {m[3]} ms{m[4]}") for m in re.finditer(
        r"DiT: (\d+) video tokens: (\d+) forwards, ([\d.]+) ms each \(median\)(.*)", stdout)]  # fmt: skip
    time_line = re.search(r"time: (.*); compiling: (.*)", stdout)
    if time_line:
        phases = re.findall(r"([a-z][a-z0-9 ]*?) ([\d.]+ s)", time_line[1])
        rows += [(name, value) for name, value in phases if name != "prompt encoding"]  # encoded ahead
        rows.append(("compiling (within the phases above)", time_line[2]))
    total = re.search(r"total: ([\d.]+ s)", stdout)
    rows.append(("total (in the process)", total[1] if total else "?"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("manifest", help="manifest.json written by scripts/make_synthetic_checkpoint.py")
    parser.add_argument("--flow", choices=sorted(REFERENCE_MODULES), default="two-stage")
    parser.add_argument("--height", type=int, default=1024)
    parser.add_argument("--width", type=int, default=1536)
    parser.add_argument("--num-frames", type=int, default=121)
    parser.add_argument("--prompt", default="A red fox trots through fresh snow at dawn")
    parser.add_argument(
        "--runs", nargs="+", choices=["reference", "cold", "warm"], default=["reference", "cold", "warm"]
    )
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/ltx_jax_bench_cache"))
    parser.add_argument("--quantization", default="none", help="generate.py's --quantization (none, fp8-cast, fp8)")
    parser.add_argument("--out-dir", type=Path, default=Path(os.environ.get("OUT", "/tmp")))
    parser.add_argument("--timeline", action="store_true", help="generate.py under benchmarks/generate_timeline.py")
    args = parser.parse_args()
    files = json.loads(Path(args.manifest).read_text())
    args.out_dir.mkdir(parents=True, exist_ok=True)
    if "cold" in args.runs:
        shutil.rmtree(args.cache_dir, ignore_errors=True)
    for name in args.runs:
        out = args.out_dir / f"{args.flow}-{name}.mp4"
        build = reference_command if name == "reference" else generate_command
        seconds, stdout = run(build(args.flow, files, args, out), args.out_dir / f"{args.flow}-{name}.log")
        rows = [tuple(line[6:].split(": ", 1)) for line in stdout.splitlines() if line.startswith("PHASE ")]
        rows = rows if name == "reference" else generate_phases(stdout)
        label = "ltx-pipelines 1.0.0" if name == "reference" else f"ltx-jax generate.py, {name} compilation cache"
        if name != "reference" and args.quantization != "none":
            label += f", --quantization {args.quantization}"
        print(f"\n{args.flow} {args.width}x{args.height}x{args.num_frames}: {label}, process wall {seconds:.1f} s")
        for phase, value in rows:
            print(f"  {phase:<44} {value}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
