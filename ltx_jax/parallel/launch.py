"""The one way ltx-jax launches programs that span several devices: in one order, and never far ahead.

Why a bound. JAX dispatches asynchronously, so a loop of jitted calls (48 DiT blocks, 48 Gemma layers)
queues programs faster than the devices run them. XLA's CPU client runs each device's part of a
multi-device program on one pool of max(cores, devices) threads, and a part that finds 32 computations
already in flight on its device waits for a slot *on a pool thread*. With more than 32 queued, those
waiting parts can hold the threads that the running program's collective needs: 7 of 8 participants
reach the all-reduce, the eighth never gets a thread, and XLA aborts the process after 40 s ("Expected
8 threads to join the rendezvous, but only 7 of them arrived"). 200 chained collective programs
dispatched without waiting aborted 3 runs of 3 on a 2-core machine (`tests/test_launch.py`), and
`generate.py --mesh 8` on checkpoint files aborted about one run in three, in Gemma's layer loop
(4 of 4 with four prompts).

Why one order. Programs with collectives must reach every device in the same order; launched from
two threads at once (a loader thread and the main one), one device could take A then B and another
B then A, which hangs NCCL. `launch` holds one lock while it dispatches, so launches from every
thread form one sequence.

So every loop that launches multi-device programs calls them through `launch` (or wraps them once
with `launched`): after each launch on CPU devices, if more than `MAX_IN_FLIGHT` launches are
unfinished, it waits for the oldest whose outputs still exist. An output donated to the next program
no longer exists; its program finished before that program started, which is waited for instead, so
a chain of donating programs is drained every `MAX_IN_FLIGHT` launches.

Programs on GPUs are not held back: their client takes a device's slot on that device's own launch
thread, which the device's stream frees, so a long queue only makes the host wait, and draining the
48-block chain every 16 launches cost 2.1% of a forward on an H200 (`benchmarks/bench_launch.py`:
the device idles while the next block is dispatched). They keep the lock, and with it the one order.
"""

from __future__ import annotations

import collections
import threading
import weakref
from collections.abc import Callable
from typing import Generic, ParamSpec, TypeVar

import jax

# Half of the 32 computations XLA allows in flight per device: the rest is room for the few programs
# launched outside `launch` (a sampler's arithmetic between two DiT forwards, a reshard).
MAX_IN_FLIGHT = 16

Args = ParamSpec("Args")
Out = TypeVar("Out")


class Launcher:
    """Launches programs one at a time (a lock) and, for programs on CPU devices, waits whenever more than
    `max_in_flight` of its launches may be unfinished. Outputs are held by weak reference: a launch never
    keeps memory alive."""

    def __init__(self, max_in_flight: int) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}.")
        self.max_in_flight = max_in_flight
        self._lock = threading.Lock()
        self._unfinished: collections.deque[list[weakref.ref]] = collections.deque()

    def __call__(self, program: Callable[Args, Out], /, *args: Args.args, **kwargs: Args.kwargs) -> Out:
        with self._lock:
            outputs = program(*args, **kwargs)
            arrays = [x for x in jax.tree.leaves(outputs) if isinstance(x, jax.Array)]
            if not arrays or next(iter(arrays[0].devices())).platform != "cpu":
                return outputs  # only XLA's CPU client makes its pool threads wait for a slot
            self._unfinished.append([weakref.ref(x) for x in arrays])
            if len(self._unfinished) > self.max_in_flight:
                self._wait_for_oldest()
        return outputs

    def _wait_for_oldest(self) -> None:
        """Forgets launches from the oldest on until one has outputs that still exist, and waits for it
        (the newest launch's outputs exist: the caller has not received them yet)."""
        while self._unfinished:
            alive = [x for ref in self._unfinished.popleft() if (x := ref()) is not None and not x.is_deleted()]
            if alive:
                jax.block_until_ready(alive)
                return


LAUNCHER = Launcher(MAX_IN_FLIGHT)


def launch(program: Callable[Args, Out], /, *args: Args.args, **kwargs: Args.kwargs) -> Out:
    """`program(*args, **kwargs)` through the process's one `Launcher`."""
    return LAUNCHER(program, *args, **kwargs)


class Launched(Generic[Args, Out]):
    """A jitted program whose calls go through `launch`; everything else (`lower`, `_cache_size`, ...)
    is the program's own."""

    def __init__(self, program: Callable[Args, Out]) -> None:
        self.program = program

    def __call__(self, *args: Args.args, **kwargs: Args.kwargs) -> Out:
        return launch(self.program, *args, **kwargs)

    def __getattr__(self, name: str) -> object:
        return getattr(self.program, name)


def launched(program: Callable[Args, Out]) -> Launched[Args, Out]:
    """`program`, called through `launch` from now on."""
    return Launched(program)
