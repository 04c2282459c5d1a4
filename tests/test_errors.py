"""Failures end with one line: exit statuses, interruptions (SIGINT, SIGTERM, SIGHUP) that leave no partial
file behind, meshes no run can use, and no unsafe deserialization of user files anywhere."""

import dataclasses
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys
import threading
import time

import jax
import numpy as np
import pytest
import safetensors.numpy
import torch
from checkpoint_files import official_state, write_checkpoint
from jax.sharding import Mesh
from ltx_core_twin import torch_model

import ltx_jax
from ltx_jax.convert.dit_tensors import Lora
from ltx_jax.parallel import SequenceParallel

ROOT = pathlib.Path(__file__).parents[1]
from ltx_jax.cli import generate  # noqa: E402 - the command: its parser, without running it

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1"}


def default_signals() -> None:
    """In the child before it starts: SIGINT and SIGHUP as a fresh process has them, whatever this one
    inherited (a background job starts with SIGINT ignored, `nohup` ignores SIGHUP, and children inherit it)."""
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def start(command: list[str], **kwargs: object) -> subprocess.Popen:
    return subprocess.Popen(command, env=ENV, stderr=subprocess.PIPE, text=True, preexec_fn=default_signals, **kwargs)


def wait_for(condition, what: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    start = time.monotonic()
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"the process ended ({process.returncode}) before {what}: {process.stderr.read()}")
        if time.monotonic() - start > timeout:
            process.kill()
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.05)


def assert_one_line_interruption(process: subprocess.Popen, signum: int, what: str) -> None:
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 128 + signum, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-2000:]
    last = stderr.strip().splitlines()[-1]
    assert last == f"interrupted by {signal.Signals(signum).name}: {what} stopped; no partial output was left."


def test_a_signal_during_mp4_writing_leaves_no_file(tmp_path):
    """Interrupted while the H.264 stream is being written: the `.partial.mp4` is removed, no mp4 appears.
    (One signal: the handler is the same for all three, which the sweeps below send in turn.)"""
    signum = signal.SIGHUP
    out = tmp_path / "out.mp4"
    child = (
        "import sys, numpy as np\n"
        "from ltx_jax.interrupts import describe, exit_status, signals_interrupt\n"
        "from ltx_jax.pipeline import write_mp4\n"
        "frames = np.random.default_rng(0).integers(0, 255, (2000, 256, 256, 3), dtype=np.uint8)\n"
        "try:\n"
        "    with signals_interrupt():\n"
        f"        write_mp4({str(out)!r}, frames, 24.0)\n"
        "except KeyboardInterrupt as stop:\n"
        "    print(describe(stop, 'writing'), file=sys.stderr)\n"
        "    sys.exit(exit_status(stop))\n"
    )
    process = start([sys.executable, "-c", child])
    partial = tmp_path / "out.mp4.partial.mp4"
    wait_for(lambda: partial.exists() and partial.stat().st_size > 0, "partial mp4", process)
    process.send_signal(signum)
    assert_one_line_interruption(process, signum, "writing")
    assert list(tmp_path.iterdir()) == []


def converting_child(tmp_path: pathlib.Path, num_layers: int, setup: str) -> subprocess.Popen:
    """`ltx-jax convert` converting a tiny checkpoint into `tmp_path / "out"`, in a child that runs
    `setup` (Python lines) first; returned once its `.partial-*` directory exists."""
    src = tmp_path / "model.safetensors"
    cfg = ltx_jax.LTXConfig.tiny(num_layers=num_layers)
    write_checkpoint(src, cfg, official_state(torch_model(cfg).state_dict(), torch.bfloat16))
    child = (
        f"import sys\n{setup}from ltx_jax.cli import convert\n"
        f"sys.exit(convert.main([{str(src)!r}, {str(tmp_path / 'out')!r}]))\n"
    )
    process = start([sys.executable, "-c", child])
    wait_for(lambda: any(p.name.startswith(".out.partial-") for p in tmp_path.iterdir()), "partial dir", process)
    return process


# Seconds after the `.partial-*` directory appears: the conversion below writes about 150 parts in about 2 s
# on a 2-core machine, so these land before, across and (the last) after its writes.
CONVERSION_SIGNAL_DELAYS = (0.0, 0.4, 0.8, 1.3, 2.0, 4.0)


@pytest.mark.parametrize("delay", CONVERSION_SIGNAL_DELAYS)
def test_a_signal_at_any_moment_of_a_conversion_leaves_no_partial_directory(tmp_path, delay):
    """Swept across the writes of many small parts (an interruption inside Orbax's save of a part used to
    leave `.partial-*` behind: its writer threads went on after the cleanup). Each run ends in one line
    with 128 + the signal and nothing left, or completes (the signal came after the end)."""
    signum = SIGNALS[CONVERSION_SIGNAL_DELAYS.index(delay) % len(SIGNALS)]
    # many parts: most of the run is inside their saves
    process = converting_child(
        tmp_path, 8, "import ltx_jax.convert.orbax_parts as parts\nparts.PART_BYTES = 16 * 1024\n"
    )
    time.sleep(delay)
    process.send_signal(signum)
    if process.wait(timeout=120) == 0:  # finished before the signal
        assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors", "out"]
        assert (tmp_path / "out" / "ltx_jax_checkpoint.json").is_file()
        return
    assert_one_line_interruption(process, signum, "conversion")
    time.sleep(0.5)  # anything still writing would show up now
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]


def test_a_signal_during_conversion_leaves_no_directory(tmp_path):
    """scripts/convert_checkpoint.py interrupted after creating its `.partial-*` directory: it is removed.
    (The child pauses in the write step only to hold that moment open for the signal; one signal, as above.)"""
    signum = signal.SIGTERM
    hold = (
        "import time\nimport ltx_jax.convert.checkpoint as checkpoint\nwrite = checkpoint._write_params\n"
        "checkpoint._write_params = lambda *args: (time.sleep(60), write(*args))[1]\n"
    )
    process = converting_child(tmp_path, 1, hold)
    process.send_signal(signum)
    assert_one_line_interruption(process, signum, "conversion")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.safetensors"]


# Seconds after a generation's devices are up: a small embedded run then builds its models, encodes the
# prompt, denoises, decodes and writes its mp4 in about 4 s (warm compilation cache) to 30 s (cold) on a
# 2-core machine, so these land in each of those and (the last, warm) after the end.
GENERATION_SIGNAL_DELAYS = (0.0, 1.0, 2.0, 3.0, 4.5, 12.0)


@pytest.mark.parametrize("delay", GENERATION_SIGNAL_DELAYS)
def test_a_signal_at_any_moment_of_a_generation_is_one_line_and_writes_nothing(tmp_path, delay):
    """`scripts/generate.py` on the embedded model, SIGTERM or SIGINT swept across the run: status 128 + the
    signal, one line that says what is true, and no file; or, after the end, the finished mp4 alone."""
    signum = SIGNALS[GENERATION_SIGNAL_DELAYS.index(delay) % len(SIGNALS)]
    out = tmp_path / "out.mp4"
    small = ["--height", "64", "--width", "96", "--num-frames", "9", "--num-inference-steps", "2"]
    process = start(
        [sys.executable, "scripts/generate.py", "--mesh", "2", *small, "--output-path", str(out)],
        cwd=ROOT, stdout=subprocess.PIPE,
    )  # fmt: skip
    lines = []
    threading.Thread(target=lambda: lines.extend(process.stdout), daemon=True).start()
    wait_for(lambda: any(line.startswith("devices: ") for line in lines), "the run's start", process)
    time.sleep(delay)
    process.send_signal(signum)
    if process.wait(timeout=300) == 0:  # finished before the signal
        assert [p.name for p in tmp_path.iterdir()] == ["out.mp4"]
        return
    assert_one_line_interruption(process, signum, "generation")
    assert list(tmp_path.iterdir()) == []


def test_errors_are_one_line_with_their_status(tmp_path, capsys):
    """A bad argument: status 2; a failure: status 1 (no traceback either way); --debug: the exception."""
    args = generate.parse_args(["--height", "0", "--output-path", str(tmp_path / "x.mp4")])
    with pytest.raises(SystemExit) as exit_info:
        generate.reporting_errors(args, lambda: generate.run(args))
    assert exit_info.value.code == 2
    message = "height=0 must be a positive multiple of 32 for the one-stage flow (try 32)."
    assert capsys.readouterr().err == f"error: {message}\n"

    def fail(_):
        raise RuntimeError("the device ran\nout of memory")

    with pytest.raises(SystemExit) as exit_info:
        generate.reporting_errors(args, lambda: fail(args))
    assert exit_info.value.code == 1
    assert capsys.readouterr().err == (
        "error: RuntimeError: the device ran out of memory (--debug shows the traceback)\n"
    )
    with pytest.raises(RuntimeError, match="out of memory"):
        generate.reporting_errors(generate.parse_args(["--debug"]), lambda: fail(args))


def test_meshes_no_run_can_use_are_refused():
    cfg = ltx_jax.LTXConfig.tiny(num_layers=1)
    model = ltx_jax.LTXModel.abstract(cfg, np.float32)
    devices = jax.devices()
    with pytest.raises(ValueError, match=re.escape("mesh: devices [0] appear more than once")):
        SequenceParallel(model, Mesh(np.array([devices[0], devices[0]]), ("sp",)))
    with pytest.raises(ValueError, match="make_mesh: a mesh of 9 devices needs 9 devices but 8 are present"):
        ltx_jax.parallel.make_mesh(9)


def test_no_user_file_is_unpickled_or_evaluated():
    """Weights, configs and media are read with safetensors, Orbax, JSON and PyAV: never pickle, torch.load,
    eval/exec or np.load(allow_pickle=True)."""
    pattern = re.compile(r"\bpickle\b|torch\.load\(|(?<![\w.])eval\(|(?<![\w.])exec\(|allow_pickle\s*=\s*True")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in ("ltx_jax", "scripts")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []


def documented_errors() -> list[tuple[str, str, str]]:
    """docs/errors.md's table: (flags, exception name, message)."""
    rows = re.findall(r"^\| `([^`]*)` \| (\w+) \| (.*) \|$", (ROOT / "docs" / "errors.md").read_text(), re.M)
    return [(flags, kind, message.replace("\\|", "|")) for flags, kind, message in rows if kind != "exception"]


def test_the_documented_errors_are_the_ones_raised(monkeypatch, no_model_building):
    monkeypatch.chdir(ROOT)
    rows = documented_errors()
    assert len(rows) >= 30
    for flags, kind, message in rows:
        argv = shlex.split(flags)
        with pytest.raises(Exception) as raised:  # noqa: PT011 - the row names the type
            generate.run(generate.parse_args([*argv, *([] if "--output-path" in argv else ["--output-path", "x.mp4"])]))
        assert (type(raised.value).__name__, str(raised.value)) == (kind, message), flags


def test_output_paths_and_prompt_embeddings_are_checked_before_building(tmp_path, no_model_building):
    """An output under a file, and embeddings of the wrong width, stop the run before any model is built."""
    under_a_file = ["--output-path", str(ROOT / "README.md" / "out.mp4")]
    with pytest.raises(NotADirectoryError, match="README.md is a file, so no folder can be made there"):
        generate.run(generate.parse_args(under_a_file))
    np.savez(tmp_path / "wide.npz", video=np.zeros((1, 4, 7), np.float32), audio=np.zeros((1, 4, 7), np.float32))
    embeddings = ["--prompt-embeddings", str(tmp_path / "wide.npz"), "--output-path", str(tmp_path / "x.mp4")]
    with pytest.raises(ValueError, match=r"--prompt-embeddings .*wide.npz: prompt.video must be a \(1, S, 64\)"):
        generate.run(generate.parse_args(embeddings))


def test_short_reference_videos_and_foreign_loras_are_refused_before_building(tmp_path):
    """ic-lora: a reference video shorter than the request (10 frames of 17), or at another frame rate, is refused;
    a LoRA whose modules are not in the checkpoint's DiT is refused by CheckpointFiles.check (headers)."""
    from ltx_jax.pipeline import CheckpointFiles, GenerationSettings, VideoCondition, write_mp4  # noqa: PLC0415
    from ltx_jax.pipeline.defaults import EMBEDDED_DEFAULTS  # noqa: PLC0415

    short = tmp_path / "short.mp4"
    write_mp4(short, np.zeros((10, 64, 64, 3), np.uint8), 24.0)
    settings = GenerationSettings(height=128, width=128, num_frames=17, reference_videos=(VideoCondition(short),))
    with pytest.raises(ValueError, match="short.mp4' gives 10 frames of the 17 requested; the VAE encodes 8k\\+1"):
        settings.resolve(EMBEDDED_DEFAULTS, "ic-lora")
    with pytest.raises(ValueError, match="short.mp4' runs at 24 fps and the generation at 30; re-encode it"):
        dataclasses.replace(settings, frame_rate=30.0).resolve(EMBEDDED_DEFAULTS, "ic-lora")
    cfg = ltx_jax.LTXConfig.tiny(num_layers=1)
    write_checkpoint(tmp_path / "model.safetensors", cfg, official_state(torch_model(cfg).state_dict(), torch.float32))
    foreign = {f"diffusion_model.unet.down.0.lora_{p}.weight": np.zeros((2, 2), np.float32) for p in "AB"}
    safetensors.numpy.save_file(foreign, tmp_path / "foreign.safetensors")
    foreign_lora = Lora(str(tmp_path / "foreign.safetensors"))
    files = CheckpointFiles(tmp_path / "model.safetensors", loras=(foreign_lora,))
    with pytest.raises(ValueError, match="foreign.safetensors matches no DiT weight .* trained for another model"):
        files.check("one-stage")


def test_a_converted_directory_needs_its_components_file(tmp_path):
    """A converted --checkpoint-path holds the DiT only: the VAEs, vocoder and connectors come from the file
    it was converted from (beside it) or --components-path; --lora files must be fused when converting."""
    from ltx_jax.pipeline import CheckpointFiles  # noqa: PLC0415

    cfg = ltx_jax.LTXConfig.tiny(num_layers=1)
    src = tmp_path / "model.safetensors"
    write_checkpoint(src, cfg, official_state(torch_model(cfg).state_dict(), torch.float32))
    ltx_jax.convert_checkpoint(src, tmp_path / "converted", dtype="float32", progress=False)
    CheckpointFiles(tmp_path / "converted").check("one-stage")  # finds model.safetensors beside it
    with pytest.raises(ValueError, match="loras \\(--lora\\) fuse into the weights as a .safetensors loads"):
        CheckpointFiles(tmp_path / "converted", loras=(Lora(str(src)),)).check("one-stage")
    src.rename(tmp_path / "elsewhere.safetensors")
    with pytest.raises(FileNotFoundError, match="'model.safetensors', the file it was converted from, is not beside"):
        CheckpointFiles(tmp_path / "converted").check("one-stage")
    CheckpointFiles(tmp_path / "converted", components_path=tmp_path / "elsewhere.safetensors").check("one-stage")
    deeper = ltx_jax.LTXConfig.tiny(num_layers=2)
    write_checkpoint(
        tmp_path / "other.safetensors", deeper, official_state(torch_model(deeper).state_dict(), torch.float32)
    )
    with pytest.raises(ValueError, match="with 2 blocks, but .* was converted from LTX .* with 1: pass the file"):
        CheckpointFiles(tmp_path / "converted", components_path=tmp_path / "other.safetensors").check("one-stage")
    with pytest.raises(ValueError, match="is not a converted ltx-jax checkpoint"):
        CheckpointFiles(tmp_path).check("one-stage")


def test_a_signal_lost_in_a_gc_callback_is_raised_at_the_next_check(capsys):
    """Python discards exceptions raised in garbage-collector callbacks (JAX registers one): a SIGTERM
    handled there must still stop the run, at the next `raise_if_signalled` (each forward, frame, tensor)."""
    import gc  # noqa: PLC0415

    from ltx_jax.interrupts import Terminated, raise_if_signalled, signals_interrupt  # noqa: PLC0415

    def during_collection(phase, _):
        if phase == "start":
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, inside the callback
            sum(range(1000))  # a few bytecodes for it to run in

    with signals_interrupt():
        gc.callbacks.append(during_collection)
        try:
            gc.collect()  # the Terminated raised inside the callback is discarded ("Exception ignored in")
        finally:
            gc.callbacks.remove(during_collection)
        with pytest.raises(Terminated, match="SIGTERM"):
            raise_if_signalled()
    raise_if_signalled()  # outside the block nothing is pending
    assert "Exception ignored" not in capsys.readouterr().err  # the lost one was not reported as a traceback


@pytest.mark.parametrize(
    ("given", "error", "named"),
    [({"frame_rate": 0.0}, ValueError, "frame_rate must be positive"), ({"num_frames": "9"}, TypeError, "num_frames")],
)
def test_a2vid_audio_length_is_not_derived_from_unchecked_sizes(given, error, named):
    """a2vid's default audio length is the video's duration, num_frames / frame_rate: values it cannot be computed
    from are named by the checks (once a ZeroDivisionError, found by tests/test_preflight_property.py)."""
    from ltx_jax.pipeline import GenerationSettings  # noqa: PLC0415
    from ltx_jax.pipeline.defaults import EMBEDDED_DEFAULTS  # noqa: PLC0415

    with pytest.raises(error, match=named):
        GenerationSettings(audio_path="missing.wav", **given).resolve(EMBEDDED_DEFAULTS, "a2vid")


def test_a_command_ends_without_the_interpreters_teardown():
    """`exit_now`: the status given, the output flushed, and no teardown after it (here an exit handler that
    would sleep, as JAX's backends take seconds to tear down): the generation sweep met a SIGHUP there, after the
    mp4 was written, where CPython had put the default handlers back, and the process died of it (status -1)."""
    program = (
        "import atexit, time\nfrom ltx_jax.interrupts import exit_now\n"
        "atexit.register(lambda: (time.sleep(30), print('teardown')))\nprint('written', end='')\nexit_now(3)\n"
    )
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert (result.returncode, result.stdout, result.stderr) == (3, "written", "")
    assert time.perf_counter() - start < 25
