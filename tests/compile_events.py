"""Which thread compiled which XLA program: JAX reports every compilation through `jax.monitoring`."""

import threading

import jax

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"  # jax's event for every XLA compilation
COMPILE_THREAD = "ltx-jax-compile"  # the prefix of the pipeline's background compilation thread


class CompileThreads:
    """The programs compiled while active, as (thread name, program name), e.g. "jit(decode_audio)"."""

    def __init__(self):
        self.compiled = []

    def __call__(self, event, duration, fun_name="", **kwargs):
        if event == BACKEND_COMPILE:
            self.compiled.append((threading.current_thread().name, fun_name))

    def __enter__(self):
        jax.monitoring.register_event_duration_secs_listener(self)
        return self

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self)

    def on_main_thread(self) -> set[str]:
        return {name for thread, name in self.compiled if thread == threading.main_thread().name}

    def ahead(self) -> set[str]:
        return {name for thread, name in self.compiled if thread.startswith(COMPILE_THREAD)}
