"""The Python pipeline object on the embedded default, called several times: what each call costs once
the models are loaded and compiled, and whether a call compiled anything.

    python benchmarks/pipeline_twice.py            # every device present (simulated CPU devices: set XLA_FLAGS)
"""

import time

import jax

import ltx_jax
from ltx_jax.parallel import make_mesh

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"


def main() -> None:
    compiles: list[float] = []

    def listener(event: str, duration: float, **_: object) -> None:
        if event == BACKEND_COMPILE:
            compiles.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)
    start = time.perf_counter()
    pipe = ltx_jax.LTXPipeline.embedded(mesh=make_mesh(jax.device_count()))
    print(f"{jax.device_count()} x {jax.devices()[0].device_kind}: built in {time.perf_counter() - start:.1f} s")
    for seed in (10, 10, 11):
        compiles.clear()
        start = time.perf_counter()
        out = pipe("A red fox trots through fresh snow at dawn", num_frames=25, seed=seed)
        phases = ", ".join(f"{phase} {seconds:.2f} s" for phase, seconds in out.timings.items())
        print(
            f"seed {seed}: {time.perf_counter() - start:.2f} s ({phases}); {len(compiles)} compilations "
            f"({sum(compiles):.1f} s); video {out.video.shape}, first pixel sum {int(out.video[0].sum())}"
        )


if __name__ == "__main__":
    main()
