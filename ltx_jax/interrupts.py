"""Interrupted runs end with one line and leave nothing partial behind.

Ctrl-C (SIGINT) raises `KeyboardInterrupt`, so the cleanup paths run: `write_mp4` removes its
`.partial.mp4`, `convert_checkpoint` its `.partial-*` directory. SIGTERM (what `kill`, schedulers and
container runtimes send) and SIGHUP (a closed terminal) instead end the process at once by default,
skipping that cleanup. Inside `signals_interrupt()` they raise `Terminated`, a `KeyboardInterrupt`, in
the main thread, so every run ends the same way whatever stopped it; `exit_status` gives the shell's
`128 + signal` code and `describe` the one line to print.

Python discards an exception raised inside a garbage-collector callback or a `__del__` (JAX registers
one), so a signal landing there would be lost and the run would go on. The handler also records the
signal, and the loops that can run long (each DiT forward, each frame written, each tensor converted)
call `raise_if_signalled()`, which raises it again if it was lost.

Once a command's work is done (its output complete), the interpreter's own exit would tear JAX's backends down,
seconds on a loaded machine, after CPython has put its signal handlers back to the default: a SIGTERM or SIGHUP
then killed the process by the default action (a status that reads as an interruption, and no line). The
commands' entry points end with `exit_now(status)` instead.

A process of a multi-process run must not stop alone: its peers would wait for it inside a collective
until JAX's heartbeat timeout aborts them. After joining the cluster, `stop_together(gather)` makes the
handlers (SIGINT's too) only record the signal; at points every process reaches (each DiT forward, each
prompt enhanced, the prompts encoded, each video done), `check_stop()` gathers every process's pending
signal and, if any has one, all raise `Terminated` together. A second signal stops its process at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from types import FrameType
from typing import NoReturn

TERMINATING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
Gather = Callable[[int], Sequence[int]]  # this process's pending signal (0: none) -> every process's


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived (`signum`): raised where the main thread was, like Ctrl-C's interrupt
    (in a multi-process run, also SIGINT, on every process: see `stop_together`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_pending: list[int] = []  # signals received in the current signals_interrupt() block
_caught: list[int] = []  # the signals the current block turns into `Terminated`
_gather: list[Gather] = []  # set by stop_together(): stop decisions are taken by all processes at once


def _raise_terminated(signum: int, _: FrameType | None) -> None:
    _pending.append(signum)
    raise Terminated(signum)


def _record(signum: int, _: FrameType | None) -> None:
    if _pending:  # a second signal: this process stops now, alone (its peers end by JAX's heartbeat)
        _pending.append(signum)
        raise Terminated(signum)
    _pending.append(signum)


def stop_together(gather: Gather) -> None:
    """Within `signals_interrupt()`, after joining a cluster: SIGINT, SIGTERM and SIGHUP (unless ignored)
    are only recorded, and `check_stop()` stops every process at once (`gather` exchanges their pending
    signals). Also takes SIGTERM back from JAX: `jax.distributed.initialize` installs a handler of its
    own (its preemption notifier) that swallows it."""
    if threading.current_thread() is not threading.main_thread() or not _caught:
        return
    _gather[:] = [gather]
    for signum in (signal.SIGINT, *_caught):
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _record)


def check_stop() -> None:
    """At a point every process reaches: raises `Terminated` on every process of the run if any has
    a pending signal (see `stop_together`); in a single process, `raise_if_signalled()`."""
    if not _gather:
        raise_if_signalled()
        return
    stopped = [signum for signum in _gather[0](_pending[0] if _pending else 0) if signum]
    if stopped:
        raise Terminated(stopped[0])


def raise_if_signalled() -> None:
    """Raises `Terminated` for a SIGTERM / SIGHUP whose exception was lost (see the module docstring).
    In a cluster (`stop_together`) it leaves the stop to the next `check_stop()`, where every process
    stops: one process leaving alone (process 0 writing the mp4) would strand the others."""
    if _pending and not _gather:
        raise Terminated(_pending[0])


@contextlib.contextmanager
def signals_interrupt() -> Iterator[None]:
    """Within the block (on the main thread), SIGTERM and SIGHUP raise `Terminated`; the previous
    handlers come back on exit. A signal the process ignores stays ignored (`nohup` ignores SIGHUP so
    that the run outlives its terminal). Elsewhere (a worker thread cannot set handlers) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = [signum for signum in TERMINATING_SIGNALS if signal.getsignal(signum) is not signal.SIG_IGN]
    previous = {signum: signal.signal(signum, _raise_terminated) for signum in caught}
    previous[signal.SIGINT] = signal.getsignal(signal.SIGINT)  # stop_together() may record it instead
    _caught[:] = caught
    unraisable = sys.unraisablehook

    def quiet_when_lost(report: object) -> None:  # a lost Terminated is raised again: no "Exception ignored"
        if not isinstance(report.exc_value, Terminated):
            unraisable(report)

    sys.unraisablehook = quiet_when_lost
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        sys.unraisablehook = unraisable
        _pending.clear()
        _caught.clear()
        _gather.clear()


def exit_now(status: int) -> NoReturn:
    """Ends the process with `status` at once, its output flushed, skipping the interpreter's teardown (see the
    module docstring). For a command's entry point only: the caller's process ends. A process of a cluster first
    leaves it with JAX's shutdown barrier, which every process reaches at its end, so that process 0, which hosts
    the coordinator, does not vanish while a peer still talks to it."""
    jax = sys.modules.get("jax")  # not imported here: `--help` and usage errors end before JAX starts
    if status == 0 and jax is not None and jax.distributed.is_initialized():
        jax.distributed.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Within the block (on the main thread), SIGINT, SIGTERM and SIGHUP are only recorded; when it ends,
    the first one is raised as `Terminated` (in a cluster, left to the next `check_stop`). For work that
    an exception must not cut in the middle: Orbax's save of a checkpoint part, interrupted, left its
    writer threads running, and they recreated files in the directory the cleanup was removing.
    Elsewhere (a worker thread cannot set handlers) it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, *TERMINATING_SIGNALS)}
    for signum, handler in previous.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, lambda signum, _: received.append(signum))
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received and _gather:
        _pending.extend(received)
    elif received:
        raise Terminated(received[0])


def _signum(interrupt: KeyboardInterrupt) -> int:
    return interrupt.signum if isinstance(interrupt, Terminated) else signal.SIGINT


def exit_status(interrupt: KeyboardInterrupt) -> int:
    """The status a shell reports for a process the signal ended: 128 + its number (130 for Ctrl-C)."""
    return 128 + _signum(interrupt)


def describe(interrupt: KeyboardInterrupt, what: str) -> str:
    """One line: which signal stopped `what`, and that no partial output was left."""
    return f"interrupted by {signal.Signals(_signum(interrupt)).name}: {what} stopped; no partial output was left."
