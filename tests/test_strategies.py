"""SequenceParallel's strategies "allgather_kv", "ring" and "usp" against the single-device model.

8 simulated CPU devices (conftest); the 16-device mesh runs in a subprocess (this file as a script).
Models have one block: a block's attention is where the strategies differ, and compiles dominate.
"""

import collections
import dataclasses
import inspect
import json
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cpu_compile import xla_flags
from flax import nnx
from ltx_core_twin import default_inputs, relative_error
from tolerances import SP

import ltx_jax
from ltx_jax.model import attention_backends
from ltx_jax.model.attention_backends import block_attention_backend, cudnn_attention_with_lse
from ltx_jax.parallel import SequenceParallel, attention_with_lse, make_mesh
from ltx_jax.parallel.blockwise import merge_partial
from ltx_jax.parallel.sharding import param_sharding

SUBPROCESS_TIMEOUT_S = 300
# 8 heads on both streams: "usp" needs them divisible by the ulysses degree (2, 4) only.
AV = ltx_jax.LTXConfig.tiny(
    num_layers=1, num_attention_heads=8, attention_head_dim=8, audio_num_attention_heads=8, audio_attention_head_dim=4
)
# 6 video heads: no 8-device Ulysses can run it; ring, all-gather-KV and USP with ulysses=2 can.
VIDEO = dataclasses.replace(AV, model_type="video", num_attention_heads=6, cross_attention_dim=48)
# layout -> (strategy, devices, ulysses degree); "uspRxU" is a ring of R x ulysses of U.
LAYOUTS = {
    "allgather_kv": ("allgather_kv", 8, None),
    "ring": ("ring", 8, None),
    "usp2x4": ("usp", 8, 4),
    "usp4x2": ("usp", 8, 2),
    "usp4x4": ("usp", 16, 4),
}


@pytest.fixture(scope="module")
def models():
    return {cfg.model_type: ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0), attention_backend="xla") for cfg in (AV, VIDEO)}


@pytest.fixture(scope="module")
def sp_for(models):
    """One SequenceParallel per (model, strategy), shared by the tests so each shape compiles once."""
    cache = {}

    def get(model_type: str, layout: str) -> SequenceParallel:
        if (model_type, layout) not in cache:
            cache[model_type, layout] = build_sp(models[model_type], layout)
        return cache[model_type, layout]

    return get


@pytest.fixture(scope="module")
def references(models):
    """The single-device outputs of each case, computed once."""
    cache = {}

    def get(case: str) -> tuple:
        if case not in cache:
            model_type, tokens, mask_kind, _ = CASES[case]
            cache[case] = single_device(models[model_type], *inputs(models[model_type].cfg, tokens, mask_kind))
        return cache[case]

    return get


def build_sp(model: ltx_jax.LTXModel, layout: str) -> SequenceParallel:
    strategy, n, ulysses = LAYOUTS[layout]
    return SequenceParallel(model, make_mesh(n, ulysses=ulysses), strategy=strategy)


def inputs(cfg, tokens, mask_kind="none"):
    """Batch 2. "dense": a caller (B, T, T) mask with weights 0, 0.5, 1 and one fully masked row;
    "keys": a broadcast key mask (B, 1, T) hiding keys 10..29 of sample 1."""
    video, audio = default_inputs(cfg, batch=2, video_tokens=tokens)
    video, audio = video.to_jax(), (audio.to_jax() if audio else None)
    rng = np.random.default_rng(0)
    if mask_kind == "dense":
        mask = rng.choice(np.array([0.0, 0.5, 1.0, 1.0], np.float32), size=(2, tokens, tokens))
        mask[0, 7, :] = 0.0
        video = dataclasses.replace(video, attention_mask=jnp.asarray(mask))
    elif mask_kind == "keys":
        mask = np.ones((2, 1, tokens), np.float32)
        mask[1, 0, 10:30] = 0.0
        video = dataclasses.replace(video, attention_mask=jnp.asarray(mask))
    return video, audio


def single_device(model, video, audio):
    return nnx.jit(lambda m, v, a: m(v, a))(model, video, audio)


def errors(ours, reference) -> list[float]:
    """Relative error per output stream (video, audio)."""
    out = []
    for o, r in zip(ours, reference, strict=True):
        assert (o is None) == (r is None)
        if r is not None:
            assert o.shape == r.shape
            out.append(float(relative_error(o, np.asarray(r))))
    return out


CASES = {
    "av-50-dense": ("av", 50, "dense", ["allgather_kv", "ring", "usp2x4", "usp4x2"]),
    "av-121-keys": ("av", 121, "keys", ["allgather_kv", "ring", "usp2x4", "usp4x2"]),
    "video-121": ("video", 121, "none", ["allgather_kv", "ring", "usp4x2"]),
    # 9 tokens on 8 devices: blocks of 2, the last three blocks are all padding (key length 0).
    "video-9": ("video", 9, "none", ["ring"]),
}


@pytest.mark.parametrize(
    ("case", "layout"), [(case, layout) for case, (*_, layouts) in CASES.items() for layout in layouts]
)
def test_equals_single_device(models, sp_for, references, case, layout):
    model_type, tokens, mask_kind, _ = CASES[case]
    video, audio = inputs(models[model_type].cfg, tokens, mask_kind)
    ours = sp_for(model_type, layout)(video, audio)
    assert max(errors(ours, references(case))) <= SP


def collectives(sp: SequenceParallel, video, audio) -> collections.Counter:
    lowered = sp.lower(video, audio)
    pattern = r"\b(all-to-all|all-gather|all-reduce|collective-permute|reduce-scatter)\("
    return collections.Counter(re.findall(pattern, lowered.compile().as_text()))


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        # Per block: K/V all-gathers for attn1 and for video-to-audio; one all-gather of the output.
        ("allgather_kv", {"all-gather": 2 + 1}),
        # 7 K/V rotations in attn1; video-to-audio merges partial results: a max and a sum all-reduce.
        ("ring", {"collective-permute": 7, "all-reduce": 2, "all-gather": 1}),
        # Ulysses' 3 all-to-alls inside 4 devices, 1 rotation over the ring of 2, the merge over the
        # ring, the video-to-audio heads gathered, the output gathered.
        ("usp2x4", {"all-to-all": 3, "collective-permute": 1, "all-reduce": 2, "all-gather": 2}),
    ],
)
def test_compiled_collectives(sp_for, layout, expected):
    """The AV case of test_equals_single_device, one block: exactly these collectives, no all-to-all
    outside USP (and so none spanning all 8 devices)."""
    assert collectives(sp_for("av", layout), *inputs(AV, 121, "keys")) == expected


@pytest.mark.parametrize("pad_keys_as", ["bias", "key_lengths"])
def test_ring_block_attention_merges_to_full_attention(pad_keys_as):
    """attention_with_lse over 3 key blocks, the last one all padding, merged == one-shot attention;
    pad keys given as a -inf bias or as key lengths (3, 2 and 0 real keys)."""
    rng = np.random.default_rng(1)
    q, k, v = (jnp.asarray(rng.normal(size=(2, 5, 3, 4)), jnp.float32) for _ in range(3))
    k, v = jnp.concatenate([k, k[:, :2] * 2], axis=1), jnp.concatenate([v, v[:, :2] - 1], axis=1)  # 7 keys
    bias = jnp.where(jnp.arange(7) < 5, 0.0, -jnp.inf)[None, None, None, :]  # keys 5, 6 are padding
    reference = jax.nn.dot_product_attention(q, k[:, :5], v[:, :5], implementation="xla")
    out = lse = None
    for block, real_keys in ((slice(0, 3), 3), (slice(3, 5), 2), (slice(5, 7), 0)):
        if pad_keys_as == "bias":
            masking = {"bias": bias[..., block]}
        else:
            masking = {"key_lengths": jnp.full((2,), real_keys, jnp.int32)}
        part = attention_with_lse(q, k[:, block], v[:, block], **masking)
        out, lse = part if out is None else merge_partial(out, lse, *part)
    assert relative_error(out, np.asarray(reference)) <= SP
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k[:, :5]) / 2.0
    np.testing.assert_allclose(lse, jax.nn.logsumexp(scores, axis=-1), rtol=SP)


def test_all_padding_block_is_empty():
    """A block with key length 0 gives lse = -inf and out = 0 (no NaN), so the merge drops it."""
    q, k, v = (jnp.ones((1, 2, 1, 4)) for _ in range(3))
    out, lse = attention_with_lse(q, k, v, key_lengths=jnp.zeros((1,), jnp.int32))
    assert np.all(np.asarray(out) == 0)
    assert np.all(np.isneginf(np.asarray(lse)))


def test_ring_kernel_defaults_to_auto_which_picks_xla_where_cudnn_cannot_run():
    assert inspect.signature(SequenceParallel).parameters["ring_kernel"].default == "auto"
    q = jnp.asarray(np.random.default_rng(0).standard_normal((1, 4, 2, 8)), jnp.float32)
    out, lse = block_attention_backend("auto")(q, q, q)  # float32 on CPU: the XLA kernel, exactly
    ref_out, ref_lse = attention_with_lse(q, q, q)
    assert np.array_equal(np.asarray(out), np.asarray(ref_out))
    assert np.array_equal(np.asarray(lse), np.asarray(ref_lse))


def test_ring_kernel_is_kept_for_ring_strategies_only(sp_for):
    assert sp_for("av", "ring").ring_kernel == "auto"
    assert sp_for("av", "allgather_kv").ring_kernel is None


@pytest.mark.parametrize(
    ("strategy", "ring_kernel", "message"),
    [
        ("ring", "cudnn", r"ring_kernel='cudnn' needs a GPU; JAX's default backend is 'cpu'\. Use ring_kernel='auto'"),
        ("ring", "flash", r"ring_kernel must be one of \['auto', 'cudnn', 'xla'\], got 'flash'"),
        ("ulysses", "xla", r"ring_kernel='xla' is the block attention of strategy='ring' and 'usp'; got .*'ulysses'"),
    ],
)
def test_bad_ring_kernel(models, strategy, ring_kernel, message):
    with pytest.raises(ValueError, match=message):
        SequenceParallel(models["av"], make_mesh(8), strategy=strategy, ring_kernel=ring_kernel)


@pytest.mark.parametrize("hopper", [True, False])
def test_cudnn_block_rule_mirrors_jax_checks(monkeypatch, hopper):
    """What "auto" hands to cuDNN on a GPU (the platform and compute capability faked here): jax's
    cuDNN attention with statistics rejects odd lengths with a bias and, before Hopper, head dims
    above 128, so those blocks must go to XLA instead of raising inside jax."""
    monkeypatch.setattr(attention_backends.jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(attention_backends.cudnn_fmha, "check_compute_capability", lambda capability: hopper)
    q, bias = jnp.ones((1, 64, 2, 128), jnp.bfloat16), jnp.zeros((1, 1, 64, 64), jnp.float32)
    odd = jnp.ones((1, 61, 2, 128), jnp.bfloat16)
    assert attention_backends.cudnn_block_unsupported(q, bias, q) is None
    assert attention_backends.cudnn_block_unsupported(odd, None, odd) is None  # odd lengths are fine without a bias
    assert "even query and key lengths, got 61 and 61" in attention_backends.cudnn_block_unsupported(odd, bias, odd)
    wide = jnp.ones((1, 64, 2, 256), jnp.bfloat16)
    reason = attention_backends.cudnn_block_unsupported(wide, None, wide)
    assert (reason is None) == hopper
    assert hopper or "at most 128 on this GPU, got 256" in reason
    # The DiT's own cuDNN attention shares the rule: (B, T, H*D) with 2 heads of 256.
    assert (attention_backends.cudnn_attention_unsupported(wide.reshape(1, 64, 512), 2, None) is None) == hopper


def test_cudnn_block_attention_refuses_cpu():
    q = jnp.ones((1, 4, 2, 8), jnp.bfloat16)
    with pytest.raises(ValueError, match=r"ring_kernel='cudnn' cannot run this attention block: it needs a GPU"):
        cudnn_attention_with_lse(q, q, q)


@pytest.mark.parametrize(
    ("model_type", "strategy", "mesh_args", "message"),
    [
        ("av", "usp", (8,), r"strategy='usp' needs a 2-D mesh with axes \('ring', 'ulysses'\).*make_mesh\(n, ulysses="),
        ("av", "ring", (8, 4), r"strategy='ring' runs on a 1-D mesh .* Use strategy='usp' on this mesh"),
        ("video", "usp", (8, 4), r"num_attention_heads \(6\) must be divisible by the ulysses degree \(4\)"),
        ("video", "ulysses", (8,), r"num_attention_heads \(6\) must be divisible by the mesh size \(8\)"),
        ("av", "zigzag", (8,), r"strategy must be one of \['ulysses', 'allgather_kv', 'ring', 'usp'\], got 'zigzag'"),
    ],
)
def test_impossible_layouts(models, model_type, strategy, mesh_args, message):
    mesh = make_mesh(mesh_args[0], ulysses=mesh_args[1] if len(mesh_args) > 1 else None)
    with pytest.raises(ValueError, match=message):
        SequenceParallel(models[model_type], mesh, strategy=strategy)


def test_audio_heads_not_divisible_by_ulysses_degree():
    cfg = dataclasses.replace(AV, audio_num_attention_heads=2, audio_attention_head_dim=16)
    with pytest.raises(ValueError, match=r"audio_num_attention_heads \(2\) must be divisible by the ulysses degree"):
        SequenceParallel(ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0)), make_mesh(8, ulysses=4), strategy="usp")


def test_ffi_backend_is_ulysses_only(models):
    with pytest.raises(ValueError, match=r"backend='ffi' .* strategy='ulysses' only; got strategy='ring'"):
        SequenceParallel(models["av"], make_mesh(8), strategy="ring", backend="ffi")


def test_bad_ulysses_degree():
    with pytest.raises(
        ValueError, match=r"ulysses must be a positive divisor of n=8 .* got 3\. Use one of \[1, 2, 4, 8\]"
    ):
        make_mesh(8, ulysses=3)


def sixteen_device_errors() -> dict[str, list[float]]:
    """USP on a 4 x 4 mesh with 8-head streams (more devices than heads), with replicated and with
    FSDP-sharded weights. Run with 16 devices."""
    video, audio = inputs(AV, 50, "dense")
    model = ltx_jax.LTXModel(AV, rngs=nnx.Rngs(0), attention_backend="xla")
    reference = single_device(model, video, audio)
    result = {"replicated": errors(build_sp(model, "usp4x4")(video, audio), reference)}
    mesh = make_mesh(16, ulysses=4)
    sharded = ltx_jax.LTXModel(AV, rngs=nnx.Rngs(0), attention_backend="xla")
    state = nnx.state(sharded)
    nnx.update(sharded, jax.tree.map(lambda x: jax.device_put(x, param_sharding(x.shape, mesh, True)), state))
    sp = SequenceParallel(sharded, mesh, strategy="usp")
    assert sp.shard_weights
    result["sharded_weights"] = errors(sp(video, audio), reference)
    return result


def test_usp_on_16_devices_with_8_heads():
    env = dict(os.environ, XLA_FLAGS=xla_flags(16))
    command = [sys.executable, os.path.abspath(__file__)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(e <= SP for stream in result.values() for e in stream), result


if __name__ == "__main__":
    sys.stdout.write(json.dumps(sixteen_device_errors()) + "\n")
