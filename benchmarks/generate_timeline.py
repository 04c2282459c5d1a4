"""Where a `scripts/generate.py` run's main thread spends its time: a sampled timeline (issue #20).

    python benchmarks/generate_timeline.py TIMELINE.json -- --mesh 1 --pipeline two-stage ...   # generate.py's flags
    python benchmarks/generate_timeline.py --report TIMELINE.json [--bucket 0.5]

Runs generate.py in this process with a sampler thread beside it: every `--interval` seconds it records
each thread's innermost frames (the deepest in ltx_jax or scripts, and the deepest of all) and its CPU
seconds so far (Linux: /proc/self/task/TID/stat), and it records every XLA compilation JAX logs
(`jax_log_compiles`) with its thread and duration. A thread whose CPU time does not advance while its
stack stays in Python is waiting: for the GIL, a lock, or the device. `--report` prints the main
thread's timeline in buckets (CPU share and where it was) and the compilations per thread.
"""

from __future__ import annotations

import argparse
import collections
import faulthandler
import json
import logging
import os
import re
import runpy
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMPILED = re.compile(r"Finished XLA compilation of (.+) in ([0-9.e-]+) sec")
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(native_id: int) -> float | None:
    try:
        fields = Path(f"/proc/self/task/{native_id}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _where(frame: object) -> tuple[str, str]:
    """The deepest frame in this repository's code, and the deepest frame of all, as 'file:function'."""
    deepest, ours = None, None
    while frame is not None:
        name = f"{Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"
        deepest = deepest or name
        if ours is None and _is_ours(frame.f_code.co_filename):
            ours = name
        frame = frame.f_back
    return ours or "-", deepest or "-"


def _is_ours(filename: str) -> bool:
    return filename.startswith(str(REPO)) and "site-packages" not in filename and "/benchmarks/" not in filename


class _CompileLog(logging.Handler):
    def __init__(self, start: float, events: list) -> None:
        super().__init__(logging.WARNING)
        self.start, self.events = start, events

    def emit(self, record: logging.LogRecord) -> None:
        match = COMPILED.search(record.getMessage())
        if match:
            self.events.append((round(record.created - self.start, 3), record.threadName, match[1], float(match[2])))


def record(out: Path, generate_args: list[str], interval: float, stacks_interval: float | None) -> None:
    start = time.time()
    stacks = None
    if stacks_interval:  # every thread's Python stack, written by a C thread: also while one holds the GIL
        stacks = out.with_suffix(".stacks.txt").open("w")
        faulthandler.dump_traceback_later(stacks_interval, repeat=True, file=stacks)
    samples: list = []
    compiles: list = []
    logging.getLogger().addHandler(_CompileLog(start, compiles))
    logging.getLogger().setLevel(logging.WARNING)
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(interval):
            frames = sys._current_frames()  # noqa: SLF001 - the sampler's purpose
            now = round(time.time() - start, 3)
            for thread in threading.enumerate():
                if thread is threading.current_thread() or thread.ident not in frames:
                    continue
                ours, deepest = _where(frames[thread.ident])
                samples.append((now, thread.name, _cpu_seconds(thread.native_id), ours, deepest))

    import jax  # here, not at the top: --report reads a file and needs no JAX

    jax.config.update("jax_log_compiles", True)
    sampler = threading.Thread(target=sample, name="timeline-sampler", daemon=True)
    sampler.start()
    sys.argv = ["generate.py", *generate_args]
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        runpy.run_path(str(REPO / "scripts" / "generate.py"), run_name="__main__")
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            raise
    finally:
        stop.set()
        sampler.join()
        if stacks is not None:
            faulthandler.cancel_dump_traceback_later()
            stacks.close()
        main_thread = f"0x{threading.main_thread().ident:016x}"
        out.write_text(
            json.dumps(
                {
                    "interval": interval,
                    "samples": samples,
                    "compiles": compiles,
                    "stacks_interval": stacks_interval,
                    "main_thread": main_thread,
                }
            )
        )
        print(f"timeline: {len(samples)} samples, {len(compiles)} compilations -> {out}", file=sys.stderr)


def report(path: Path, bucket: float, thread: str) -> None:
    data = json.loads(path.read_text())
    rows = [s for s in data["samples"] if s[1] == thread]
    # A sample stands for the time since the one before it: the sampler needs the GIL, so it samples
    # less often while other threads hold it.
    buckets: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    cpu: dict[int, float] = {}
    for previous, row in zip(rows, rows[1:], strict=False):
        index = int(row[0] // bucket)
        buckets[index][f"{row[3]} | {row[4]}"] += row[0] - previous[0]
        if row[2] is not None:
            cpu[index] = row[2]
    print(f"{thread}: time (s), CPU share, where (deepest frame of ltx_jax or scripts | deepest frame): seconds")
    previous_cpu = None
    for index in sorted(buckets):
        cpu_share = "  -  "
        if previous_cpu is not None and index in cpu:
            cpu_share = f"{min(1.0, (cpu[index] - previous_cpu) / bucket):4.0%}"
        previous_cpu = cpu.get(index, previous_cpu)
        where = "; ".join(f"{place} {seconds:.2f}" for place, seconds in buckets[index].most_common(2))
        print(f"{index * bucket:7.1f} {cpu_share} {where}")
    print("\ncompilations of 0.2 s or more (logged at, thread, program, seconds):")
    totals: dict[str, list] = collections.defaultdict(list)
    for at, name, program, seconds in data["compiles"]:
        totals[name].append(seconds)
        if seconds >= 0.2:
            print(f"{at:8.1f} {name:24s} {program:40s} {seconds:7.2f}")
    for name, seconds in sorted(totals.items()):
        print(f"{name:24s} {len(seconds):4d} programs, {sum(seconds):7.1f} s")


def report_stacks(path: Path, window: tuple[float, float], depth: int) -> None:
    """The main thread's innermost `depth` frames in each dump of `--stacks` within `window` (seconds)."""
    data = json.loads(path.read_text())
    dumps = path.with_suffix(".stacks.txt").read_text().split("Timeout (")[1:]
    for index, dump in enumerate(dumps):
        at = (index + 1) * data["stacks_interval"]
        if not window[0] <= at <= window[1]:
            continue
        for thread in dump.split("\n\n"):
            if f"Thread {data['main_thread']}" in thread or "Current thread " + data["main_thread"] in thread:
                frames = [line.strip() for line in thread.splitlines() if line.strip().startswith("File ")]
                print(f"{at:7.2f} " + " < ".join(_short(frame) for frame in frames[:depth]))


def _short(frame: str) -> str:
    """'File "/x/y/z.py", line 12 in f' -> 'z.py:12 f'."""
    match = re.match(r'File "(.*)", line (\d+) in (.*)', frame)
    return f"{Path(match[1]).name}:{match[2]} {match[3]}" if match else frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("timeline", type=Path)
    parser.add_argument("--report", action="store_true", help="print the timeline of TIMELINE.json")
    parser.add_argument("--bucket", type=float, default=0.5, help="seconds per line of the report")
    parser.add_argument("--thread", default="MainThread", help="the thread the report follows")
    parser.add_argument("--interval", type=float, default=0.02, help="seconds between samples")
    parser.add_argument("--stacks", type=float, help="also dump every thread's stack this often (TIMELINE.stacks.txt)")
    parser.add_argument("--window", type=float, nargs=2, help="with --report: the main thread's dumped stacks then")
    parser.add_argument("--depth", type=int, default=8, help="frames per dumped stack in the report")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)  # after "--": generate.py's flags
    args = parser.parse_args(argv[:split])
    if args.report and args.window:
        report_stacks(args.timeline, tuple(args.window), args.depth)
    elif args.report:
        report(args.timeline, args.bucket, args.thread)
    else:
        record(args.timeline, argv[split + 1 :], args.interval, args.stacks)


if __name__ == "__main__":
    main()
