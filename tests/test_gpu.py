"""GPU tests: the cuDNN attention path, against XLA attention and against ltx-core.

Skipped without a CUDA GPU; with LTX_JAX_REQUIRE_GPU=1 a missing GPU fails instead, so a GPU run
never passes by skipping.
"""

import dataclasses
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from gpu_case import SP_CFG
from ltx_core_twin import default_inputs, relative_error, run_jax, run_torch, torch_model
from tolerances import BF16, FP8_KERNEL_VS_EMULATION, FP8_KERNEL_VS_FLOAT32, FP8_STEP, LSE, SP

import ltx_jax
from ltx_jax.model.attention_backends import (
    attention_with_lse,
    cudnn_attention,
    cudnn_attention_with_lse,
    xla_attention,
)
from ltx_jax.model.fp8_attention import (
    Fp8Attention,
    cudnn_fp8_attention,
    emulated_fp8_attention,
    fp8_attention_unsupported,
)
from ltx_jax.model.quantization import per_tensor_scale, to_fp8

pytestmark = pytest.mark.gpu
LEGACY = {"av_ca_scale_shift_from_sigma": True}  # ltx-core 1.0.0's A/V AdaLN inputs
CFG = ltx_jax.LTXConfig.tiny(**LEGACY, apply_gated_attention=True, cross_attention_adaln=True)


@pytest.fixture(autouse=True)
def require_gpu():
    if jax.default_backend() != "gpu":
        if os.environ.get("LTX_JAX_REQUIRE_GPU") == "1":
            pytest.fail(f"LTX_JAX_REQUIRE_GPU=1 but JAX's backend is {jax.default_backend()!r}")
        pytest.skip("needs a CUDA GPU")


def forward_hlo(model, video, audio) -> str:
    return nnx.jit(lambda m, v, a: m(v, a)).lower(model, video, audio).compile().as_text()


def test_auto_backend_runs_cudnn_for_bf16():
    reference = torch_model(CFG)
    video, audio = default_inputs(CFG)
    model = ltx_jax.LTXModel(CFG, rngs=nnx.Rngs(0), param_dtype=jnp.bfloat16)  # attention_backend="auto"
    ltx_jax.load_state_dict(model, reference.state_dict())
    assert "__cudnn$fmha" in forward_hlo(model, video.to_jax(jnp.bfloat16), audio.to_jax(jnp.bfloat16))
    ours = run_jax(model, video, audio, dtype=jnp.bfloat16)
    for o, r in zip(ours, run_torch(reference, video, audio), strict=True):
        assert relative_error(o, r) <= BF16


def test_float32_stays_on_xla():
    video, audio = default_inputs(CFG)
    model = ltx_jax.LTXModel(CFG, rngs=nnx.Rngs(0))
    assert "__cudnn$fmha" not in forward_hlo(model, video.to_jax(), audio.to_jax())


def test_cudnn_backend_matches_xla_backend():
    reference = torch_model(CFG)
    video, audio = default_inputs(CFG, batch=2)
    video = dataclasses.replace(
        video, attention_mask=np.random.default_rng(0).uniform(0, 1, (2, 50, 50)).astype(np.float32)
    )
    xla = ltx_jax.load_state_dict(
        ltx_jax.LTXModel(CFG, rngs=nnx.Rngs(0), param_dtype=jnp.bfloat16, attention_backend="xla"),
        reference.state_dict(),
    )
    cudnn = ltx_jax.load_state_dict(
        ltx_jax.LTXModel(CFG, rngs=nnx.Rngs(0), param_dtype=jnp.bfloat16, attention_backend="cudnn"),
        reference.state_dict(),
    )
    for c, x in zip(
        run_jax(cudnn, video, audio, dtype=jnp.bfloat16), run_jax(xla, video, audio, dtype=jnp.bfloat16), strict=True
    ):
        assert relative_error(c, np.asarray(x, np.float32)) <= BF16


@pytest.mark.parametrize("with_bias", [False, True])
def test_cudnn_key_lengths_remove_padded_keys(with_bias):
    """SP's padded keys on the cuDNN path: `key_value_seq_lengths` (plus the caller's full bias)
    must equal attention over the unpadded keys."""
    b, t, pad, heads, d = 2, 1000, 8, 4, 128
    keys = jax.random.split(jax.random.key(0), 4)
    q, k, v = (jax.random.normal(key, (b, t + pad, heads * d), jnp.bfloat16) for key in keys[:3])
    bias = jax.random.uniform(keys[3], (b, 1, t + pad, t + pad), jnp.float32, -2, 0).astype(jnp.bfloat16)
    lengths = jnp.full((b,), t, jnp.int32)
    padded = cudnn_attention(q, k, v, heads=heads, mask=bias if with_bias else None, key_value_seq_lengths=lengths)
    exact = xla_attention(
        q[:, :t].astype(jnp.float32),
        k[:, :t].astype(jnp.float32),
        v[:, :t].astype(jnp.float32),
        heads=heads,
        mask=bias[:, :, :t, :t].astype(jnp.float32) if with_bias else None,
    )
    assert relative_error(padded[:, :t], np.asarray(exact)) <= BF16


@pytest.mark.parametrize("tokens", [64, 121])
@pytest.mark.parametrize(("dtype", "tolerance"), [(jnp.float32, SP), (jnp.bfloat16, BF16)])
def test_sp_over_all_gpus_equals_one_gpu(tokens, dtype, tolerance):
    n = jax.device_count()
    if n < 2:
        pytest.skip(f"needs 2 or more GPUs, found {n}")
    model = ltx_jax.LTXModel(SP_CFG, rngs=nnx.Rngs(0), param_dtype=dtype)
    video, audio = default_inputs(SP_CFG, batch=2, video_tokens=tokens)
    video, audio = video.to_jax(dtype), audio.to_jax(dtype)
    # float32 matmuls on GPU default to TF32 (~3e-4 relative noise); ask for full float32 so the
    # comparison measures the sharding, not TF32 rounding of differently tiled products.
    with jax.default_matmul_precision("highest"):
        single = nnx.jit(lambda m, v, a: m(v, a))(model, video, audio)
        sp = ltx_jax.parallel.SequenceParallel(model, ltx_jax.parallel.make_mesh(n))(video, audio)
    for s, r in zip(sp, single, strict=True):
        assert s.dtype == dtype
        assert relative_error(np.asarray(s, np.float32), np.asarray(r, np.float32)) <= tolerance


def test_sharded_checkpoint_on_all_gpus(tmp_path):
    """A converted checkpoint loaded FSDP-sharded over every GPU runs under SP like replicated weights."""
    n = jax.device_count()
    if n < 2:
        pytest.skip(f"needs 2 or more GPUs, found {n}")
    import torch
    from checkpoint_files import official_state, write_checkpoint

    write_checkpoint(
        tmp_path / "ltx.safetensors", SP_CFG, official_state(torch_model(SP_CFG).state_dict(), torch.float32)
    )
    ltx_jax.convert_checkpoint(tmp_path / "ltx.safetensors", tmp_path / "converted", dtype="float32", progress=False)
    mesh = ltx_jax.parallel.make_mesh(n)
    video, audio = (m.to_jax() for m in default_inputs(SP_CFG, batch=2, video_tokens=121))
    outputs = []
    with jax.default_matmul_precision("highest"):
        for shard_weights in (False, True):
            model, _ = ltx_jax.load_checkpoint(
                tmp_path / "converted", mesh=mesh, dtype=jnp.float32, shard_weights=shard_weights
            )
            outputs.append(ltx_jax.parallel.SequenceParallel(model, mesh)(video, audio))
    for sharded, replicated in zip(outputs[1], outputs[0], strict=True):
        assert relative_error(sharded, np.asarray(replicated)) <= SP


MASKED_LSE = -1e6  # below this a partial result weighs nothing next to a block with a real key


def block_case(b, tq, tk, heads, d, lengths, bias_kind, seed=0):
    """bf16 q/k/v, key lengths (or None) and a bias: None, "dense" `(B, 1, Tq, Tk)` in [-2, 0] with
    query row 3 masked over the whole block (finfo.min, as the model's masks), or "keys" `(B, 1, 1, Tk)`."""
    keys = jax.random.split(jax.random.key(seed), 4)
    shapes = ((b, tq, heads, d), (b, tk, heads, d), (b, tk, heads, d))
    q, k, v = (jax.random.normal(key, shape, jnp.bfloat16) for key, shape in zip(keys[:3], shapes, strict=True))
    bias = None
    if bias_kind == "dense":
        bias = jax.random.uniform(keys[3], (b, 1, tq, tk), jnp.float32, -2, 0).astype(jnp.bfloat16)
        bias = bias.at[:, :, 3].set(jnp.finfo(jnp.bfloat16).min)
    elif bias_kind == "keys":
        bias = jnp.where(jnp.arange(tk) % 3 == 0, jnp.finfo(jnp.bfloat16).min, 0)[None, None, None, :]
        bias = jnp.broadcast_to(bias, (b, 1, 1, tk)).astype(jnp.bfloat16)
    return q, k, v, None if lengths is None else jnp.asarray(lengths, jnp.int32), bias


@pytest.mark.parametrize(
    ("b", "tq", "tk", "heads", "d", "lengths", "bias_kind"),
    [
        (2, 64, 64, 4, 64, None, None),
        (2, 128, 96, 2, 128, [96, 50], None),  # pad keys, a different count per sample
        (2, 64, 64, 4, 128, [0, 17], None),  # sample 0: a block of padding only
        (2, 128, 128, 2, 128, [128, 100], "dense"),
        (1, 100, 38, 3, 64, [30], "keys"),  # query and key lengths that differ; a broadcast key mask
    ],
)
def test_cudnn_block_attention_matches_xla(b, tq, tk, heads, d, lengths, bias_kind):
    """The ring's cuDNN block kernel (flash attention + softmax statistics) against the XLA block
    kernel on the same bf16 inputs (float32 scores and softmax): output, natural-log lse, empty blocks."""
    q, k, v, key_lengths, bias = block_case(b, tq, tk, heads, d, lengths, bias_kind)
    out, lse = jax.jit(cudnn_attention_with_lse)(q, k, v, bias=bias, key_lengths=key_lengths)
    ref_out, ref_lse = jax.jit(attention_with_lse)(q, k, v, bias=bias, key_lengths=key_lengths)
    out, lse, ref_out, ref_lse = (np.asarray(x, np.float32) for x in (out, lse, ref_out, ref_lse))
    assert out.shape == (b, tq, heads, d)
    assert lse.shape == (b, heads, tq)
    assert not np.isnan(out).any()
    assert not np.isnan(lse).any()
    assert relative_error(out, ref_out) <= BF16
    real = ref_lse > MASKED_LSE
    assert np.abs(lse[real] - ref_lse[real]).max() <= LSE
    assert np.all(lse[~real] <= MASKED_LSE)
    if lengths is not None and 0 in lengths:
        empty = np.asarray(lengths) == 0
        assert np.all(np.isneginf(lse[empty]))
        assert np.all(out[empty] == 0)


@pytest.mark.parametrize(("strategy", "tokens", "mask"), [("ring", 121, False), ("ring", 64, True), ("usp", 64, True)])
def test_ring_cudnn_on_all_gpus_equals_one_gpu(strategy, tokens, mask):
    """SequenceParallel "ring"/"usp" with the default ring_kernel="auto" over every GPU (a ring of one
    on one H200) against the single-device model, bf16. The model's own attention is XLA, so every
    cuDNN call in the compiled program is the ring's block kernel: "auto" picked cuDNN."""
    n = jax.device_count()
    model = ltx_jax.LTXModel(SP_CFG, rngs=nnx.Rngs(0), param_dtype=jnp.bfloat16, attention_backend="xla")
    video, audio = (m.to_jax(jnp.bfloat16) for m in default_inputs(SP_CFG, batch=2, video_tokens=tokens))
    if mask:
        weights = np.random.default_rng(0).choice(np.array([0.0, 0.5, 1.0, 1.0], np.float32), (2, tokens, tokens))
        weights[0, 7, :] = 0.0  # a fully masked row
        video = dataclasses.replace(video, attention_mask=jnp.asarray(weights))
    single = nnx.jit(lambda m, v, a: m(v, a))(model, video, audio)
    mesh = ltx_jax.parallel.make_mesh(n, ulysses=1 if strategy == "usp" else None)
    sp = ltx_jax.parallel.SequenceParallel(model, mesh, strategy=strategy)
    assert sp.ring_kernel == "auto"
    compiled = sp.lower(video, audio).compile()
    assert "__cudnn$fmha" in compiled.as_text()
    for s, r in zip(sp(video, audio), single, strict=True):
        assert s.dtype == jnp.bfloat16
        assert relative_error(np.asarray(s, np.float32), np.asarray(r, np.float32)) <= BF16


FP8_HEADS, FP8_HEAD_DIM, FP8_TOKENS = 4, 128, 1024


def fp8_operands() -> tuple[jax.Array, jax.Array, jax.Array]:
    """q, k, v `(2, 1024, 4*128)` in bf16, k and v with a mean over the tokens (which the fp8 path takes out);
    skips where this GPU runs no fp8 attention."""
    rng = np.random.default_rng(0)
    shape, width = (2, FP8_TOKENS, FP8_HEADS * FP8_HEAD_DIM), FP8_HEADS * FP8_HEAD_DIM
    q, k, v = (
        jnp.asarray(rng.standard_normal(shape) + rng.standard_normal(width) * m, jnp.bfloat16) for m in (0, 2, 4)
    )
    if fp8_attention_unsupported(q, FP8_HEADS, None, None):
        pytest.skip(fp8_attention_unsupported(q, FP8_HEADS, None, None))
    return q, k, v


def test_fp8_attention_runs_cudnns_fp8_kernel_close_to_its_emulation():
    """On Hopper, `Fp8Attention` runs cuDNN's fp8 flash attention. Its attention part (the output less v's
    mean, which comes back exactly) stays within fp8's rounding of float32 attention, and the kernel within
    fp8's rounding of `emulated_fp8_attention` (the CPU's) on the same zero-mean operands (3.7e-2 relative L2
    at 32 heads and 6,144 tokens in benchmarks/probe_fp8_attention.py)."""
    heads, dim, tokens = FP8_HEADS, FP8_HEAD_DIM, FP8_TOKENS
    q, k, v = fp8_operands()
    fp8 = jax.jit(lambda q, k, v: Fp8Attention(fallback=xla_attention)(q, k, v, heads=heads))
    program = fp8.lower(q, k, v).compile().as_text()
    assert program.count('custom_call_target="__cudnn$fmhaSoftmaxF8"') == 2  # one call per sample
    v_mean = np.asarray(v, np.float32).mean(axis=1, keepdims=True)
    exact = np.asarray(xla_attention(*(x.astype(jnp.float32) for x in (q, k, v)), heads=heads)) - v_mean
    assert relative_error(np.asarray(fp8(q, k, v), np.float32) - v_mean, exact) < FP8_KERNEL_VS_FLOAT32
    operands = []
    for x in (q[:1] - q[:1].mean(), jax.random.normal(jax.random.key(1), q[:1].shape), v[:1] - v[:1].mean(1)):
        scale = per_tensor_scale(x)
        operands += [to_fp8(x.reshape(1, tokens, heads, dim), scale), jnp.reshape(scale, (1, 1, 1, 1))]
    kernel = jax.jit(cudnn_fp8_attention)(*operands).astype(jnp.float32)
    emulated = jax.jit(emulated_fp8_attention)(*operands).astype(jnp.float32)
    assert relative_error(np.asarray(kernel), np.asarray(emulated)) < FP8_KERNEL_VS_EMULATION


def test_fp8_attention_drops_sequence_parallel_padding_and_stays_in_fp8():
    """Sequence parallelism's padded call (key lengths; 1,000 real tokens of 1,024, the gathered sequence as
    Ulysses passes it) runs cuDNN's fp8 kernel on the 1,000 real tokens: their rows equal the fp8 attention of
    those tokens alone (a separate program, so within one e4m3 step of the output), the pad rows are zero, and
    the result is fp8's, not the bf16 fallback's."""
    heads, valid = FP8_HEADS, 1000
    q, k, v = fp8_operands()
    lengths = jnp.full((2,), valid, jnp.int32)
    padded = jax.jit(
        lambda q, k, v: Fp8Attention(xla_attention, valid_tokens=valid)(
            q, k, v, heads=heads, key_value_seq_lengths=lengths
        )
    )
    assert padded.lower(q, k, v).compile().as_text().count('custom_call_target="__cudnn$fmhaSoftmaxF8"') == 2
    got = np.asarray(padded(q, k, v), np.float32)
    real = (slice(None), slice(0, valid))
    alone = jax.jit(lambda q, k, v: Fp8Attention(xla_attention)(q, k, v, heads=heads))(q[real], k[real], v[real])
    v_mean = np.asarray(v[real], np.float32).mean(axis=1, keepdims=True)
    assert relative_error(got[real] - v_mean, np.asarray(alone, np.float32) - v_mean) < FP8_STEP
    assert not got[:, valid:].any()
    bf16 = xla_attention(q, k, v, heads=heads, key_value_seq_lengths=lengths)
    assert relative_error(got[real] - v_mean, np.asarray(bf16, np.float32)[real] - v_mean) > 1e-2
