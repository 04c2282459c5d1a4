"""fp8 video self-attention (`quantize_fp8`, `ltx_jax.model.fp8_attention`), emulated on the CPU.

No reference runs fp8 attention (ltx-core's fp8 modes keep attention in bf16), so the arithmetic is
checked against numpy's float8_e4m3fn (ml_dtypes) doing the same steps, and the model against its bf16
self within fp8's rounding.
"""

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P
from ltx_core_twin import default_inputs, jax_model, relative_error, run_jax, torch_model
from test_quantization import CFG, FP8_EFFECT
from tolerances import BF16_ROUNDING, ELEMENTWISE, FP8_ATTENTION_ATOL, FP8_ATTENTION_RTOL

import ltx_jax
from ltx_jax.model import fp8_attention
from ltx_jax.model.attention_backends import cudnn_attention, xla_attention
from ltx_jax.model.fp8_attention import OUTPUT_HEADROOM, Fp8Attention, fp8_attention_unsupported
from ltx_jax.model.quantization import FP8_EXCLUDED_BLOCKS, quantize_fp8
from ltx_jax.parallel import SequenceParallel, make_mesh
from ltx_jax.parallel.allgather import AllGatherKVAttention
from ltx_jax.parallel.exchange import lax_all_to_all
from ltx_jax.parallel.ulysses import UlyssesAttention

E4M3 = ml_dtypes.float8_e4m3fn
HEADS, HEAD_DIM = 2, 16


def rounded(x: np.ndarray, scale: np.float32) -> np.ndarray:
    """x rounded to e4m3 in units of `scale`, back in float32."""
    return np.clip(x / scale, -448, 448).astype(E4M3).astype(np.float32) * scale


def numpy_fp8_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """One sample `(T, H, D)`: k and v centered over the tokens; q, k, v per tensor in e4m3; the softmax's
    unnormalized weights in e4m3 (scale 1/448); the output in e4m3 with v's scale, plus v's mean; float32."""
    v_mean = v.mean(0)
    k, v = k - k.mean(0), v - v_mean
    q, k, v = (rounded(x, np.abs(x).max() / np.float32(448)) for x in (q, k, v))
    scores = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(np.float32(q.shape[-1]))
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    out = np.einsum("hqk,khd->qhd", rounded(weights, np.float32(1 / 448)), v) / weights.sum(-1).T[..., None]
    return rounded(out, np.abs(v).max() / np.float32(448) * np.float32(OUTPUT_HEADROOM)) + v_mean


def random_qkv(batch: int = 2, tokens: int = 24) -> list[np.ndarray]:
    """Keys and values with a mean over the tokens (which the fp8 path takes out before rounding)."""
    rng = np.random.default_rng(0)
    return [
        (rng.standard_normal((batch, tokens, HEADS * HEAD_DIM)) * s + rng.standard_normal(HEADS * HEAD_DIM) * m).astype(
            np.float32
        )
        for s, m in ((1, 0), (1, 2), (3, 4))
    ]


def test_fp8_attention_equals_numpy_doing_the_same_rounding():
    q, k, v = random_qkv()
    got = np.asarray(Fp8Attention(fallback=xla_attention)(*map(jnp.asarray, (q, k, v)), heads=HEADS))
    for b in range(2):
        split = [x[b].reshape(-1, HEADS, HEAD_DIM) for x in (q, k, v)]
        expected = numpy_fp8_attention(*split).reshape(got[b].shape)
        np.testing.assert_allclose(got[b], expected, rtol=FP8_ATTENTION_RTOL, atol=FP8_ATTENTION_ATOL)
    plain = np.asarray(xla_attention(*map(jnp.asarray, (q, k, v)), heads=HEADS))
    assert 1e-3 < relative_error(got, plain) < 0.1  # fp8 moved it, by a few percent


def test_a_samples_scales_are_its_own():
    """Each sample is quantized with its own scales: its result does not depend on what is batched beside it."""
    q, k, v = random_qkv()
    attention = Fp8Attention(fallback=xla_attention)
    both = np.asarray(attention(*(jnp.asarray(x) for x in (q, k, v)), heads=HEADS))
    alone = np.asarray(attention(*(jnp.asarray(x[1:]) for x in (q, k, v)), heads=HEADS))
    np.testing.assert_array_equal(alone, both[1:])


def test_masked_and_padded_calls_go_to_the_fallback(caplog, monkeypatch):
    monkeypatch.setattr(fp8_attention, "_logged_reasons", set())  # a fresh process: each reason not yet shown
    q, k, v = (jnp.asarray(x) for x in random_qkv())
    mask = jnp.zeros((2, 1, 24, 24), jnp.float32).at[:, :, :, 20:].set(-1e9)
    lengths = jnp.array([20, 24], jnp.int32)
    attention = Fp8Attention(fallback=xla_attention)
    for options in ({"mask": mask}, {"key_value_seq_lengths": lengths}):
        assert fp8_attention_unsupported(q, HEADS, options.get("mask"), options.get("key_value_seq_lengths"))
        expected = xla_attention(q, k, v, heads=HEADS, **options)
        np.testing.assert_array_equal(np.asarray(attention(q, k, v, heads=HEADS, **options)), np.asarray(expected))
    # Told the real token count, a call with a mask besides the key lengths still goes to the fallback.
    both = {"mask": mask, "key_value_seq_lengths": jnp.array([20, 20], jnp.int32)}
    expected = xla_attention(q, k, v, heads=HEADS, **both)
    got = Fp8Attention(fallback=xla_attention, valid_tokens=20)(q, k, v, heads=HEADS, **both)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "runs in bf16" in r.getMessage()]
    assert len(warned) == 1  # three calls fell back for one reason (no mask, no key padding): one warning


def test_a_padded_call_that_fp8_cannot_run_goes_to_the_fallback_without_the_pad_tokens():
    """A head dim cuDNN's fp8 kernel does not take (12): the fallback attends over the 20 real keys; the pad
    rows come back zero."""
    q, k, v = (jnp.asarray(x[..., : HEADS * 12]) for x in random_qkv())
    lengths = jnp.array([20, 20], jnp.int32)
    padded = Fp8Attention(fallback=xla_attention, valid_tokens=20)
    got = np.asarray(padded(q, k, v, heads=HEADS, key_value_seq_lengths=lengths))
    expected = np.asarray(xla_attention(q, k, v, heads=HEADS, key_value_seq_lengths=lengths))
    np.testing.assert_allclose(got[:, :20], expected[:, :20], rtol=ELEMENTWISE, atol=ELEMENTWISE)
    assert not got[:, 20:].any()


def test_quantize_fp8_marks_video_self_attention_of_its_blocks_and_it_moves_the_output_by_fp8_rounding():
    """Block 0 stays bf16 (FP8_EXCLUDED_BLOCKS); block 1's video self-attention turns fp8. Against fp8 matmuls
    alone the output moves (fp8 attention ran), and against bf16 by fp8's rounding (measured 2.5e-2 video,
    2.0e-2 audio with it; 2.6e-2 / 2.4e-2 without)."""
    assert 0 in FP8_EXCLUDED_BLOCKS
    plain = jax_model(CFG, torch_model(CFG, 0))
    matmuls = quantize_fp8(jax_model(CFG, torch_model(CFG, 0)), attention=False)
    both = quantize_fp8(jax_model(CFG, torch_model(CFG, 0)))
    assert [b.attn1.fp8 for b in both.transformer_blocks] == [False, True]
    assert not any(b.attn1.fp8 for b in matmuls.transformer_blocks)
    assert not any(b.audio_attn1.fp8 for b in both.transformer_blocks)
    video, audio = default_inputs(CFG)
    base, only_matmuls, fp8 = (run_jax(m, video, audio) for m in (plain, matmuls, both))
    assert relative_error(fp8[0], np.asarray(only_matmuls[0])) > 1e-3
    for name, ours, reference in zip(("video", "audio"), fp8, base, strict=True):
        effect = relative_error(ours, np.asarray(reference))
        assert FP8_EFFECT[0] < effect < FP8_EFFECT[1], (name, effect)


@pytest.mark.parametrize("strategy", ["ulysses", "allgather_kv"])
# 20 of 48: a device of real and pad tokens and one of padding only; without padding (48):
# test_sequence_parallel_runs_fp8_attention_...[48]
@pytest.mark.parametrize("valid", [20])
def test_sequence_parallel_fp8_attention_uses_the_scales_of_one_device(strategy, valid):
    """Under Ulysses each device holds half the heads after the exchange, under all-gathered keys half the
    queries; its scales are the maxima over the mesh axis (`axis_name`), so the result equals one device's
    (heads and tokens differ in size, so each half's own maximum would round differently). With 47 real
    tokens padded to 48, the pad token (ten times the others, so its maximum would set every scale) is
    dropped: the real tokens' output equals one device's on those 47, in fp8, not in the bf16 fallback; so
    with 20 of 48, where one device's block is all padding."""
    rng = np.random.default_rng(0)
    sizes = np.repeat(np.array([3.0, 1.0, 1.0, 0.5], np.float32), HEAD_DIM)
    tokens = np.linspace(2.0, 0.5, 48, dtype=np.float32)[:, None]
    tokens[valid:] = 20.0
    q, k, v = (
        jnp.asarray(rng.standard_normal((2, 48, 4 * HEAD_DIM)).astype(np.float32) * sizes * tokens) for _ in range(3)
    )
    local = Fp8Attention(xla_attention, axis_name="sp", valid_tokens=valid)
    size = {"mesh_size": 2, "valid_tokens": valid, "padded_tokens": 48}
    if strategy == "ulysses":
        parallel = UlyssesAttention(local=local, all_to_all=lax_all_to_all, axis_name="sp", **size)
    else:
        parallel = AllGatherKVAttention(local=local, axis_name="sp", **size)
    sharded = jax.jit(
        jax.shard_map(
            lambda q, k, v: parallel.video_self_attention(q, k, v, heads=4),
            mesh=make_mesh(2),
            in_specs=P(None, "sp"),
            out_specs=P(None, "sp"),
        )
    )  # jitted: one program, not each op of the fp8 emulation compiled on its own
    real = (slice(None), slice(0, valid))
    expected = np.asarray(Fp8Attention(xla_attention)(q[real], k[real], v[real], heads=4))
    np.testing.assert_allclose(np.asarray(sharded(q, k, v))[real], expected, rtol=ELEMENTWISE, atol=ELEMENTWISE)
    assert relative_error(expected, np.asarray(xla_attention(q[real], k[real], v[real], heads=4))) > 1e-3


@pytest.mark.parametrize("tokens", [48, 47])
def test_sequence_parallel_runs_fp8_attention_on_the_gathered_sequence(monkeypatch, tokens):
    """Under Ulysses the marked `attn1` runs `Fp8Attention` after the exchange, told the real token count. The
    whole model stays within fp8's rounding of one device's (measured 1.3e-2 video: the attention matches, but
    its output lies on e4m3's grid and `to_out`'s per-token rounding breaks its ties either way on float32
    noise), with 47 tokens padded to 48 too."""
    model = quantize_fp8(jax_model(CFG, torch_model(CFG, 0)))
    locals_seen = []
    original = UlyssesAttention.video_self_attention

    def spy(self, *args, **kwargs):
        locals_seen.append(self.local)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(UlyssesAttention, "video_self_attention", spy)
    video, audio = default_inputs(CFG, batch=2, video_tokens=tokens)
    video, audio = video.to_jax(), audio.to_jax()
    ours = SequenceParallel(model, make_mesh(2))(video, audio)
    assert xla_attention in locals_seen  # block 0's
    assert Fp8Attention(xla_attention, axis_name="sp", valid_tokens=tokens) in locals_seen  # block 1's
    single = jax.jit(lambda v, a: model(v, a))(video, audio)
    for o, r in zip(ours, single, strict=True):
        assert relative_error(o, np.asarray(r)) < FP8_EFFECT[1] / 3


def test_attention_ops_give_fp8_only_when_asked():
    ops = ltx_jax.LTXModel.abstract(CFG, jnp.float32).attention_ops
    assert ops.for_module("attn1") is ops.default
    assert isinstance(ops.for_module("attn1", fp8=True), Fp8Attention)
    assert ops.for_module("attn1", fp8=True).fallback is ops.default
    wrapped = ops.with_overrides(attn1=xla_attention)
    assert wrapped.for_module("attn1", fp8=True) is xla_attention  # a wrapper that knows no fp8 keeps bf16
    both = wrapped.with_fp8_overrides(attn1=cudnn_attention)
    assert both.for_module("attn1", fp8=True) is cudnn_attention
    assert both.for_module("attn1") is xla_attention


def test_bf16_activations_come_back_in_bf16_within_bf16_of_float32():
    q, k, v = random_qkv()
    attention = Fp8Attention(fallback=xla_attention)
    ours = attention(*(jnp.asarray(x, jnp.bfloat16) for x in (q, k, v)), heads=HEADS)
    assert ours.dtype == jnp.bfloat16
    in_float32 = attention(*(jnp.asarray(x, jnp.bfloat16).astype(jnp.float32) for x in (q, k, v)), heads=HEADS)
    assert relative_error(np.asarray(ours, np.float32), np.asarray(in_float32)) < BF16_ROUNDING
