"""Attention alone at the shapes sequence parallelism hands each device: JAX kernels against torch SDPA.

    python benchmarks/bench_attention.py                      # B in (1, 4), T in (6144, 24576), H in (4, 32)
    python benchmarks/bench_attention.py --quick              # B in (1, 4), T=6144, fewer repeats and tiles
    python benchmarks/bench_attention.py --tokens 768 --heads 32 --batch 4 --out /tmp/bench

Shapes: after the Ulysses all-to-all each of n devices attends all T tokens with H/n heads (T=6144
and 24576 are LTX-2's stage-1 and stage-2 video token counts; H=4 is 32 heads on 8 devices, H=32
one device). A ring over n devices attends blocks of T/n tokens with all heads, e.g. stage 2 on 4
GPUs is (6144, 32). B: with guidance LTX-2 batches its cfg/stg/modality passes, so B=3..4 is the
real per-step batch at stage 1; B=1 is one pass.

Rows (bf16 unless noted, non-causal, scale 1/sqrt(D)):
- "xla", "cudnn", "cudnn + key lengths": `jax.nn.dot_product_attention` (token-major BTNH operands).
- "cudnn BNTH", "cudnn BNTH + key lengths": the same cuDNN kernel on head-major operands, the layout
  torch hands SDPA (the DiT stays token-major: head-major measured no faster). The note gives the
  largest difference from the token-major output.
- "ring xla + lse", "ring cudnn + lse", "ring cudnn + lse + key lengths": the ring's block kernels
  (`ltx_jax.model.attention_backends`; the cuDNN one returns cuDNN's float32 softmax statistics).
- "pallas mgpu [+ lse] (dtype)": the Mosaic GPU FlashAttention-3 kernel
  (`jax.experimental.pallas.ops.gpu.attention_mgpu`, no mask, no scale: q is pre-scaled; lse in log2
  units), best of a sweep of tile configs, tried with bf16 and with fp16 inputs.
- "pallas triton + lse": `jax.experimental.pallas.ops.gpu.attention.mha(return_residuals=True)`
  (segment ids shared by queries and keys, so no key-only mask; lse in log2 units).
- "torch sdpa", "torch sdpa + key mask" (boolean key mask).
"key lengths" / "key mask" hide the last 7 keys, as SP's padding does. "lse err" is the largest
|lse - lse_ref| (natural log) against the XLA ring kernel where that fits in memory. FLOPs:
4*B*H*T^2*D. JAX timings: median over `--repeats` of one jitted program of `--inner` chained calls
(unrolled), host-timed; torch: `--inner` calls between CUDA events. Every failure is printed in full after the table.
"""

import argparse
import functools
import itertools
import json
import math
import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # entry point: share the GPU with torch

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from jax._src.cudnn import fused_attention_stablehlo as cudnn_fmha  # noqa: E402

from ltx_jax.model.attention_backends import attention_with_lse, cudnn_attention_with_lse  # noqa: E402

PAD_KEYS = 7  # a key mask that hides the last few keys, as SP's padding does
XLA_SCORES_LIMIT = 8e9  # bytes of float32 scores above which the XLA rows are skipped
MGPU_TILES = list(itertools.product((64, 128), (64, 128, 256), (2, 4)))  # block_q, block_kv, steps
MGPU_TILES_QUICK = [(64, 128, 2), (128, 128, 2)]
Kernel = Callable[[jax.Array, jax.Array, jax.Array], jax.Array | tuple[jax.Array, jax.Array]]
Shape = tuple[int, int, int]  # B, T, H
QKV = tuple[jax.Array, jax.Array, jax.Array]
Reference = tuple[jax.Array, jax.Array] | None  # the XLA ring kernel's (out, lse), where it fits
Tile = tuple[int, int, int]  # block_q, block_kv, max_concurrent_steps
TILES_AFTER_FIRST_SWEEP = 1  # compiles dominate the run time: later shapes reuse the first sweep's best


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=None, help="default 6144 24576 (6144 with --quick)")
    parser.add_argument("--heads", type=int, nargs="+", default=[4, 32])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=None, help="default 5 (3 with --quick)")
    parser.add_argument("--inner", type=int, default=5, help="attentions per timed JAX program")
    parser.add_argument("--quick", action="store_true", help="T=6144 only, 3 repeats, 2 Pallas tile configs")
    parser.add_argument("--no-pallas", action="store_true", help="skip the Pallas rows (their tile sweeps)")
    # The Pallas mgpu sweep of the first shape: block_q 64/128 x block_kv 64/128/256 x 2/4 concurrent steps.
    parser.add_argument("--out", type=Path, default=None, help="directory for bench_attention.json")
    args = parser.parse_args(argv)
    args.tokens = args.tokens or ([6144] if args.quick else [6144, 24576])
    args.repeats = args.repeats or (3 if args.quick else 5)
    args.tiles = MGPU_TILES_QUICK if args.quick else MGPU_TILES
    return args


def time_jax(fn: Kernel, q: jax.Array, k: jax.Array, v: jax.Array, repeats: int, inner: int) -> float:
    """Seconds per attention: `inner` chained calls unrolled in one jitted program, median over
    `repeats`. k and v are arguments, not constants XLA could fold work into. A returned lse is
    summed into the result, so no kernel's statistics can be dropped as dead code. Unrolled, not a
    `fori_loop`: in a loop the same cuDNN call measured 222 us per call where ncu times its kernel
    at 156 us under both JAX and torch (benchmarks/results/2026-11-29/README.md); unrolled it is 165 us.
    Where XLA's loop spends the difference was not isolated."""

    def chain(x: jax.Array, k: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
        acc = jnp.zeros((), jnp.float32)
        for _ in range(inner):
            result = fn(x, k, v)
            out, lse = result if isinstance(result, tuple) else (result, None)
            x, acc = out.astype(q.dtype), acc if lse is None else acc + lse.sum()
        return x, acc

    program = functools.partial(jax.jit(chain), k=k, v=v)
    jax.block_until_ready(program(q))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(program(q))
        times.append((time.perf_counter() - start) / inner)
    return float(np.median(times))


def time_torch(fn: Callable[[], torch.Tensor], repeats: int, inner: int) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / inner)
    return float(np.median(times))


def failure(error: BaseException) -> str:
    """The full message, and where it was raised (an assert's message can be empty)."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" [raised at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}]" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


class Bench:
    """Collects rows `{b, t, h, kernel, seconds | None, note, lse_err}` and full error messages."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rows: list[dict] = []
        self.errors: dict[str, list[str]] = {}  # message -> the rows / configs that raised it
        # Pallas mgpu tile configs that ran in the first full sweep, fastest first, per input dtype;
        # later shapes only try the first few of them.
        self.tile_order: dict[str, list[tuple[int, int, int]]] = {}

    def record_error(self, where: str, error: BaseException) -> None:
        self.errors.setdefault(failure(error), []).append(where)

    def add(
        self, shape: Shape, kernel: str, seconds: float | None, note: str = "", lse_err: float | None = None
    ) -> None:
        b, t, h = shape
        self.rows.append(
            {"b": b, "t": t, "h": h, "kernel": kernel, "seconds": seconds, "note": note, "lse_err": lse_err}
        )

    def time_kernel(
        self, shape: Shape, kernel: str, fn: Kernel, qkv: QKV, reference: Reference = None, lse_scale: float = 1.0
    ) -> None:
        """Times `fn` on `qkv`; with `reference` (out, lse) also the lse error (`lse * lse_scale` is natural)."""
        try:
            seconds = time_jax(fn, *qkv, self.args.repeats, self.args.inner)
            lse_err = None
            if reference is not None:
                _, lse = jax.jit(fn)(*qkv)
                lse_err = float(jnp.max(jnp.abs(lse.astype(jnp.float32) * lse_scale - reference[1])))
        except Exception as error:  # noqa: BLE001 - a kernel that cannot run this shape: record why
            self.record_error(f"B={shape[0]} T={shape[1]} H={shape[2]} {kernel}", error)
            self.add(shape, kernel, None, "failed (see errors)")
            return
        self.add(shape, kernel, seconds, lse_err=lse_err)


def jax_rows(bench: Bench, b: int, t: int, h: int) -> None:
    d = bench.args.head_dim
    shape = (b, t, h)
    keys = jax.random.split(jax.random.key(0), 3)
    qkv: QKV = tuple(jax.random.normal(key, (b, t, h, d), jnp.bfloat16) for key in keys)
    lengths = jnp.full((b,), t - PAD_KEYS, jnp.int32)
    fits = b * h * t * t * 4 <= XLA_SCORES_LIMIT
    reference = jax.jit(attention_with_lse)(*qkv) if fits else None
    candidates: dict[str, tuple[Kernel, bool]] = {  # name -> (kernel, materializes scores)
        "xla": (lambda q, k, v: jax.nn.dot_product_attention(q, k, v, implementation="xla"), True),
        "cudnn": (lambda q, k, v: jax.nn.dot_product_attention(q, k, v, implementation="cudnn"), False),
        "cudnn + key lengths": (
            lambda q, k, v: jax.nn.dot_product_attention(
                q, k, v, key_value_seq_lengths=lengths, implementation="cudnn"
            ),
            False,
        ),
        "ring xla + lse": (attention_with_lse, True),
        "ring cudnn + lse": (cudnn_attention_with_lse, False),
        "ring cudnn + lse + key lengths": (
            lambda q, k, v: cudnn_attention_with_lse(q, k, v, key_lengths=lengths),
            False,
        ),
    }
    for name, (fn, materializes) in candidates.items():
        if materializes and not fits:
            bench.add(shape, name, None, f"skipped (scores > {XLA_SCORES_LIMIT / 1e9:.0f} GB)")
            continue
        bench.time_kernel(shape, name, fn, qkv, reference if name == "ring cudnn + lse" else None)
    head_major_rows(bench, shape, qkv, lengths)
    if not bench.args.no_pallas:
        mgpu_rows(bench, shape, qkv, reference)
        triton_row(bench, shape, qkv, reference)


def head_major_rows(bench: Bench, shape: Shape, qkv: QKV, lengths: jax.Array) -> None:
    """cuDNN on `(B, H, T, D)` operands (qkv_layout "BNTH"), as torch's SDPA gets them."""
    head_major = tuple(jnp.swapaxes(x, 1, 2) for x in qkv)
    scale = 1.0 / math.sqrt(qkv[0].shape[-1])
    padding = {
        "q_seqlen": jnp.full(lengths.shape, shape[1], jnp.int32),
        "kv_seqlen": lengths,
        "mask_type": cudnn_fmha.MaskType.PADDING,
    }
    token_major = {
        "cudnn BNTH": jax.nn.dot_product_attention(*qkv, implementation="cudnn"),
        "cudnn BNTH + key lengths": jax.nn.dot_product_attention(
            *qkv, key_value_seq_lengths=lengths, implementation="cudnn"
        ),
    }
    for name, extra in (("cudnn BNTH", {}), ("cudnn BNTH + key lengths", padding)):
        fn = functools.partial(cudnn_fmha.dot_product_attention, scale=scale, qkv_layout="BNTH", **extra)
        bench.time_kernel(shape, name, fn, head_major)
        if bench.rows[-1]["seconds"] is not None:
            diff = jnp.abs(jnp.swapaxes(fn(*head_major), 1, 2).astype(jnp.float32) - token_major[name])
            bench.rows[-1]["note"] = f"max diff from token-major {float(diff.max()):.1e}"


def mgpu_rows(bench: Bench, shape: Shape, qkv: QKV, reference: Reference) -> None:
    """The FA3 Mosaic GPU kernel with bf16 and with fp16 inputs, without and with the lse, at the best
    tile config of a sweep (the lse variant reuses the plain kernel's best tile)."""
    try:
        from jax.experimental.pallas.ops.gpu import attention_mgpu  # noqa: PLC0415
    except ImportError as error:
        bench.record_error("pallas mgpu import", error)
        bench.add(shape, "pallas mgpu", None, "unavailable (see errors)")
        return
    scale = 1.0 / math.sqrt(qkv[0].shape[-1])

    def kernel(tile: Tile, lse: bool) -> Kernel:
        config = attention_mgpu.TuningConfig(block_q=tile[0], block_kv=tile[1], max_concurrent_steps=tile[2])

        def run(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array | tuple[jax.Array, jax.Array]:
            q = q * jnp.asarray(scale, q.dtype)  # the kernel does not scale the scores
            if not lse:
                return attention_mgpu.attention(q, k, v, config)
            out, (log2_sum,) = attention_mgpu.attention(q, k, v, config, save_residuals=True)
            return out, log2_sum

        return run

    for dtype in ("bfloat16", "float16"):
        inputs = tuple(x.astype(dtype) for x in qkv)
        tile = sweep_tiles(bench, shape, f"pallas mgpu ({dtype})", inputs, lambda tile: kernel(tile, False), dtype)
        for lse in (False, True):
            name = f"pallas mgpu{' + lse' if lse else ''} ({dtype})"
            if tile is None:
                bench.add(shape, name, None, "no tile config ran (see errors)")
                continue
            check = reference if lse else None
            bench.time_kernel(shape, name, kernel(tile, lse), inputs, check, lse_scale=math.log(2.0))
            bench.rows[-1]["note"] = bench.rows[-1]["note"] or f"tile {tile[0]}/{tile[1]}/{tile[2]}"


def sweep_tiles(
    bench: Bench, shape: Shape, name: str, inputs: QKV, kernel: Callable[[Tile], Kernel], dtype: str
) -> Tile | None:
    """The fastest tile config: all of `args.tiles` the first time per dtype, then the fastest of that
    sweep (untimed), or the first tile again if none ran. Every failure is recorded in full."""
    order = bench.tile_order.get(dtype)
    if order is None:
        tiles = bench.args.tiles
    else:  # after the first sweep: its fastest few, or (none ran) the first few again for the messages
        tiles = (order or bench.args.tiles)[:TILES_AFTER_FIRST_SWEEP]
        if order and len(tiles) == 1:
            return tiles[0]
    timed = []
    for tile in tiles:
        try:
            timed.append((time_jax(kernel(tile), *inputs, 2, bench.args.inner), tile))
        except Exception as error:  # noqa: BLE001 - a tile config the kernel rejects: record it, try the next
            bench.record_error(f"B={shape[0]} T={shape[1]} H={shape[2]} {name} tile {'/'.join(map(str, tile))}", error)
    timed.sort()
    if order is None:
        bench.tile_order[dtype] = [tile for _, tile in timed]
    return timed[0][1] if timed else None


def triton_row(bench: Bench, shape: Shape, qkv: QKV, reference: Reference) -> None:
    try:
        from jax.experimental.pallas.ops.gpu import attention as triton_attention  # noqa: PLC0415
    except ImportError as error:
        bench.record_error("pallas triton import", error)
        bench.add(shape, "pallas triton + lse", None, "unavailable (see errors)")
        return
    scale = 1.0 / math.sqrt(qkv[0].shape[-1])

    def fn(q: jax.Array, k: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array]:
        out, lse = triton_attention.mha(q, k, v, None, sm_scale=scale, return_residuals=True)
        return out, lse

    bench.time_kernel(shape, "pallas triton + lse", fn, qkv, reference, lse_scale=math.log(2.0))


def torch_rows(bench: Bench, b: int, t: int, h: int) -> None:
    d, args = bench.args.head_dim, bench.args
    q, k, v = (torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    mask = torch.ones(b, 1, 1, t, device="cuda", dtype=torch.bool)
    mask[..., t - PAD_KEYS :] = False
    sdpa = torch.nn.functional.scaled_dot_product_attention
    bench.add((b, t, h), "torch sdpa", time_torch(lambda: sdpa(q, k, v), args.repeats, args.inner))
    bench.add(
        (b, t, h), "torch sdpa + key mask", time_torch(lambda: sdpa(q, k, v, attn_mask=mask), args.repeats, args.inner)
    )


def table(bench: Bench, rows: list[dict]) -> str:
    """Markdown: one line per (shape, kernel), speed relative to torch SDPA at the same shape."""
    d = bench.args.head_dim
    sdpa = {(r["b"], r["t"], r["h"]): r["seconds"] for r in bench.rows if r["kernel"] == "torch sdpa"}
    lines = [
        "| B | T | H | kernel | ms | TFLOP/s | x torch sdpa | lse err | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = ["-", "-", "-"]
        if r["seconds"] is not None:
            flops = 4 * r["b"] * r["h"] * r["t"] ** 2 * d
            reference = sdpa.get((r["b"], r["t"], r["h"]))
            ratio = f"{reference / r['seconds']:.2f}" if reference else "-"
            cells = [f"{r['seconds'] * 1e3:.3f}", f"{flops / r['seconds'] / 1e12:.0f}", ratio]
        lse_err = "-" if r["lse_err"] is None else f"{r['lse_err']:.1e}"
        shape = f"| {r['b']} | {r['t']:,} | {r['h']} | {r['kernel']} |"
        lines.append(f"{shape} {' | '.join(cells)} | {lse_err} | {r['note']} |")
    return "\n".join(lines)


def save(bench: Bench, header: str) -> None:
    """bench_attention.json under `--out`, rewritten after every shape so a cut-off run keeps its rows."""
    if bench.args.out is None:
        return
    bench.args.out.mkdir(parents=True, exist_ok=True)
    errors = [{"message": m, "where": w} for m, w in bench.errors.items()]
    result = {"machine": header, "head_dim": bench.args.head_dim, "rows": bench.rows, "errors": errors}
    (bench.args.out / "bench_attention.json").write_text(json.dumps(result, indent=1))


def main(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    header = f"{jax.devices()[0].device_kind}; jax {jax.__version__}, torch {torch.__version__}; D={args.head_dim}"
    print(header, flush=True)
    bench = Bench(args)
    printed = 0
    for t, h, b in itertools.product(args.tokens, args.heads, args.batch):
        first = len(bench.rows)
        jax_rows(bench, b, t, h)
        torch_rows(bench, b, t, h)
        torch.cuda.empty_cache()  # give torch's cached blocks back before JAX's next shape
        print(
            f"\nB={b} T={t} H={h} ({time.perf_counter() - started:.0f} s)\n{table(bench, bench.rows[first:])}",
            flush=True,
        )
        save(bench, header)
        for message in list(bench.errors)[printed:]:  # new failures now, in case the run is cut off
            print(f"new error: {message}", flush=True)
        printed = len(bench.errors)
    print(f"\n## All shapes\n\n{header}\n\n{table(bench, bench.rows)}\n")
    print(f"Errors ({len(bench.errors)} distinct):" if bench.errors else "No errors.")
    for message, where in bench.errors.items():
        print(f"\n- raised by {len(where)}: {'; '.join(where)}\n{message}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main(parse_args())
