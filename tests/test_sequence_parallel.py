"""SequenceParallel on 8 simulated CPU devices against the single-device model."""

import collections
import dataclasses
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from compile_events import CompileThreads
from flax import nnx
from jax.sharding import PartitionSpec as P
from ltx_core_twin import default_inputs, relative_error
from tolerances import SP

import ltx_jax
from ltx_jax import BatchedPerturbationConfig, Perturbation, PerturbationConfig, PerturbationType
from ltx_jax.parallel import SequenceParallel, make_mesh
from ltx_jax.parallel.block_programs import KEPT_MASK_PLANS
from ltx_jax.parallel.exchange import gather_heads, lax_all_to_all, send_heads
from ltx_jax.parallel.ulysses import UlyssesAttention

LEAK_EFFECT = 1e-3  # what attending to padded keys does to the audio, far above the tolerance
# 8 heads on both streams so that every mesh size up to 8 divides them.
CFG = ltx_jax.LTXConfig.tiny(
    num_attention_heads=8, attention_head_dim=8, audio_num_attention_heads=8, audio_attention_head_dim=4
)


@pytest.fixture(scope="module")
def model():
    return ltx_jax.LTXModel(CFG, rngs=nnx.Rngs(0), attention_backend="xla")


def single_device(model, video, audio, perturbations=None):
    return nnx.jit(lambda m, v, a: m(v, a, perturbations))(model, video, audio)


def assert_same(ours, reference):
    for o, r in zip(ours, reference, strict=True):
        assert (o is None) == (r is None)
        if r is not None:
            assert o.shape == r.shape
            assert relative_error(o, np.asarray(r)) <= SP


def inputs(cfg=CFG, tokens=50, batch=2):
    video, audio = default_inputs(cfg, batch=batch, video_tokens=tokens)
    return (video.to_jax() if video else None), (audio.to_jax() if audio else None)


# one device; no padding; padding with 4 heads a device, and with 1 (50 tokens on 8 devices: the padded-keys test
# below; on 4, with perturbations: the block-program tests and test_video_only_model_and_perturbations)
@pytest.mark.parametrize(("n", "tokens"), [(1, 48), (2, 121), (8, 48), (8, 121)])
def test_equals_single_device(model, n, tokens):
    video, audio = inputs(tokens=tokens)
    assert_same(SequenceParallel(model, make_mesh(n))(video, audio), single_device(model, video, audio))


@pytest.mark.parametrize(
    "tokens", [50]
)  # padded: the mask is padded too; the unpadded forward: test_equals_single_device
def test_caller_mask(model, tokens):
    video, audio = inputs(tokens=tokens)
    rng = np.random.default_rng(0)
    mask = rng.choice(np.array([0.0, 0.5, 1.0, 1.0], np.float32), size=(2, tokens, tokens))
    mask[0, 7, :] = 0.0
    video = dataclasses.replace(video, attention_mask=jnp.asarray(mask))
    assert_same(SequenceParallel(model, make_mesh(8))(video, audio), single_device(model, video, audio))


def test_broadcast_key_mask(model):
    video, audio = inputs()
    key_mask = np.ones((2, 1, 50), np.float32)
    key_mask[1, 0, 10:20] = 0.0
    video = dataclasses.replace(video, attention_mask=jnp.asarray(key_mask))
    assert_same(SequenceParallel(model, make_mesh(8))(video, audio), single_device(model, video, audio))


def test_video_only_model_and_perturbations():
    cfg = dataclasses.replace(CFG, model_type="video")
    model = ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(1), attention_backend="xla")
    video, _ = inputs(cfg)
    perturbations = BatchedPerturbationConfig(
        (
            PerturbationConfig((Perturbation(PerturbationType.SKIP_VIDEO_SELF_ATTN, (0,)),)),
            PerturbationConfig((Perturbation(PerturbationType.SKIP_VIDEO_SELF_ATTN, (0, 1)),)),
        )
    )
    assert_same(
        SequenceParallel(model, make_mesh(4))(video, None, perturbations),
        single_device(model, video, None, perturbations),
    )


def test_audio_only_call_runs_replicated(model):
    _, audio = inputs()
    assert_same(SequenceParallel(model, make_mesh(8))(None, audio), single_device(model, None, audio))


def test_the_callers_model_is_not_modified_and_later_changes_are_not_seen():
    """SequenceParallel reads the parameters once, into its own copy placed on the mesh: the caller's
    model keeps its own arrays, and changing it afterwards leaves the SequenceParallel forward as it was."""
    model = ltx_jax.LTXModel(CFG, rngs=nnx.Rngs(0), attention_backend="xla")
    kernel = model.transformer_blocks[0].attn1.to_q.kernel
    before, sharding = kernel.get_value(), kernel.get_value().sharding
    sp = SequenceParallel(model, make_mesh(8))
    assert kernel.get_value() is before
    assert kernel.get_value().sharding == sharding
    video, audio = inputs()
    expected = sp(video, audio)
    kernel.set_value(before * 2)
    assert_same(sp(video, audio), expected)
    kernel.set_value(before)


def fsdp_model(mesh):
    """The test model with its parameters split over `mesh` as load_checkpoint(shard_weights=True) places them."""
    from ltx_jax.parallel.sharding import param_sharding  # noqa: PLC0415

    model = ltx_jax.LTXModel(CFG, rngs=nnx.Rngs(0), attention_backend="xla")
    state = jax.tree.map(lambda x: jax.device_put(x, param_sharding(x.shape, mesh, True)), nnx.state(model))
    nnx.update(model, state)
    return model


def test_fsdp_blocks_gather_their_weights_inside_the_forward(model):
    """FSDP-sharded weights give the replicated forward, video and audio alone; the caller's blocks stay
    plain sharded blocks (SequenceParallel wraps its own copy), and the compiled program gathers each
    block's weights inside it."""
    mesh = make_mesh(8)
    sharded = fsdp_model(mesh)
    sp = SequenceParallel(sharded, mesh)
    assert sp.shard_weights
    assert not SequenceParallel(model, mesh).shard_weights
    assert type(sharded.transformer_blocks[0]).__name__ == "BasicAVTransformerBlock"
    kernel = sharded.transformer_blocks[0].ff.net[0].proj.kernel.get_value()
    assert kernel.addressable_shards[0].data.shape[1] == kernel.shape[1] // 8  # still sharded
    video, audio = inputs()
    assert_same(sp(video, audio), single_device(model, video, audio))
    assert_same(sp(None, audio), single_device(model, None, audio))
    gathers = collectives(compiled_hlo(sp, video, audio))["all-gather"]
    replicated = collectives(compiled_hlo(SequenceParallel(model, mesh), video, audio))["all-gather"]
    assert gathers > replicated + CFG.num_layers  # several weights per block are gathered


def test_padded_video_keys_do_not_leak_into_audio(model, monkeypatch):
    """With 50 tokens on 8 devices, 6 pad keys sit in video-to-audio attention. Masked, the audio
    equals the single-device audio; unmasked (upstream's behaviour), it visibly does not."""
    video, audio = inputs(tokens=50)
    reference = single_device(model, video, audio)
    assert_same(SequenceParallel(model, make_mesh(8))(video, audio), reference)

    monkeypatch.setattr(UlyssesAttention, "video_to_audio", _leaky(UlyssesAttention.video_to_audio))
    _, leaky_audio = SequenceParallel(model, make_mesh(8))(video, audio)
    assert relative_error(leaky_audio, np.asarray(reference[1])) > LEAK_EFFECT


def _leaky(original):
    """video_to_audio as upstream runs it: the padded keys are attended like real ones."""

    def video_to_audio(self, q, k, v, *, heads, mask=None):
        return original(dataclasses.replace(self, valid_tokens=self.padded_tokens), q, k, v, heads=heads, mask=mask)

    return video_to_audio


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_send_and_gather_heads_round_trip_bit_exact(dtype):
    mesh, n = make_mesh(8), 8
    x = jax.random.normal(jax.random.key(0), (2, 40, 16, 4)).astype(dtype)  # (B, T, H, D)

    def round_trip(local):
        sent = send_heads(local, lax_all_to_all, "sp")
        return sent, gather_heads(sent, lax_all_to_all, "sp")

    sent, back = jax.shard_map(
        round_trip, mesh=mesh, in_specs=P(None, "sp"), out_specs=(P(None, None, "sp"), P(None, "sp"))
    )(x)
    np.testing.assert_array_equal(np.asarray(back), np.asarray(x))
    # Device d holds heads [2d, 2d+2) of all 40 tokens: globally, the head axis is unchanged.
    np.testing.assert_array_equal(np.asarray(sent), np.asarray(x))
    assert sent.addressable_shards[3].data.shape == (2, 40, 16 // n, 4)
    np.testing.assert_array_equal(np.asarray(sent.addressable_shards[3].data), np.asarray(x[:, :, 6:8]))


def compiled_hlo(sp, video, audio):
    return sp.lower(video, audio).compile().as_text()


def collectives(hlo: str) -> collections.Counter:
    pattern = r"\b(all-to-all|all-gather|all-reduce|collective-permute|reduce-scatter)\("
    return collections.Counter(re.findall(pattern, hlo))


@pytest.mark.parametrize("model_type", ["av", "video"])
def test_compiled_collectives(model_type):
    """Per block: one all-to-all for stacked Q/K/V and one back; in AV models one for the stacked
    video K/V of video-to-audio attention and an all-gather of its heads. One all-gather of the
    output. Nothing else."""
    cfg = dataclasses.replace(CFG, model_type=model_type)
    model = ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0), attention_backend="xla")
    video, audio = inputs(cfg)
    av = model_type == "av"
    expected = {"all-to-all": (3 if av else 2) * cfg.num_layers, "all-gather": (cfg.num_layers if av else 0) + 1}
    assert collectives(compiled_hlo(SequenceParallel(model, make_mesh(8)), video, audio)) == expected


def test_no_dense_mask_without_caller_mask(model):
    """Batch 3 and 2 local heads (8 heads on 4 devices), 52 padded tokens: every T x T buffer in
    the compiled program must be attention scores `[3, 2, 52, 52]`, never a `[3, (1,) 52, 52]` mask.
    The same check finds the dense mask when the caller does pass one."""
    video, audio = inputs(tokens=50, batch=3)
    sp = SequenceParallel(model, make_mesh(4))

    def square_shapes(hlo: str) -> set[str]:
        return set(re.findall(r"\[(?:\d+,)*52,52\]", hlo))

    def is_scores(shape: str) -> bool:
        return shape.endswith("3,2,52,52]")

    shapes = square_shapes(compiled_hlo(sp, video, audio))
    assert shapes
    assert all(is_scores(s) for s in shapes), shapes
    masked = dataclasses.replace(video, attention_mask=jnp.ones((3, 50, 50), jnp.float32))
    assert not all(is_scores(s) for s in square_shapes(compiled_hlo(sp, masked, audio)))


def test_one_compile_per_shape(model):
    sp = SequenceParallel(model, make_mesh(8), block_programs=False)
    video, audio = inputs()
    sp(video, audio)
    sp(dataclasses.replace(video, latent=video.latent + 1), audio)
    assert sp.compiled() == {"whole": 1}
    sp(*inputs(tokens=48))
    assert sp.compiled() == {"whole": 2}


def test_block_programs_compile_one_block_for_all():
    """Four identical blocks compile one block program; a sample's perturbation on one block adds one
    program for all four (the keep-mask is an input), which another block's perturbation reuses; the
    results equal the whole forward compiled as one program, and the unrolled one."""
    cfg = dataclasses.replace(CFG, num_layers=4)
    model = ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(2), attention_backend="xla")
    video, audio = inputs(cfg)
    sp = SequenceParallel(model, make_mesh(4))
    assert_same(sp(video, audio), SequenceParallel(model, make_mesh(4), block_programs=False)(video, audio))
    sp(dataclasses.replace(video, latent=video.latent + 1), audio)
    assert sp.compiled() == {"whole": 0, "prepare": 1, "block": 1, "finish": 1}
    stg = BatchedPerturbationConfig(
        (PerturbationConfig(), PerturbationConfig((Perturbation(PerturbationType.SKIP_VIDEO_SELF_ATTN, (2,)),)))
    )
    assert_same(sp(video, audio, stg), single_device(model, video, audio, stg))
    assert sp.compiled()["block"] == 2
    stg_first = BatchedPerturbationConfig(
        (PerturbationConfig((Perturbation(PerturbationType.SKIP_VIDEO_SELF_ATTN, (0,)),)), PerturbationConfig())
    )
    assert_same(sp(video, audio, stg_first), single_device(model, video, audio, stg_first))
    assert sp.compiled()["block"] == 2
    (programs,) = sp._programs.values()
    placed = programs._masks[stg_first]
    sp(video, audio, stg_first)
    assert programs._masks[stg_first] is placed  # placed once, then reused
    for config in range(KEPT_MASK_PLANS):  # only the configs used last are kept
        skip = Perturbation(PerturbationType.SKIP_VIDEO_SELF_ATTN, (config % 4,))
        skipping = PerturbationConfig((skip,) * (1 + config // 4))  # a distinct config, the same skip
        sp(video, audio, BatchedPerturbationConfig((skipping, PerturbationConfig())))
        sp(video, audio, stg)  # in use: kept
    assert len(programs._masks) == KEPT_MASK_PLANS
    assert stg in programs._masks
    assert stg_first not in programs._masks
    assert_same(sp(video, audio, stg_first), single_device(model, video, audio, stg_first))
    assert sp.compiled()["block"] == 2


def test_block_programs_skip_what_every_sample_skips_and_mask_the_rest():
    """Every kind of skip at once: sample 0 skips audio-to-video attention in every block and video
    self-attention in block 1; sample 1 audio-to-video in block 2 (so both skip it there: not
    computed), video-to-audio in block 0 and audio self-attention in block 3. Two block programs
    (block 2's, the others'), and the unrolled model's result."""
    cfg = dataclasses.replace(CFG, num_layers=4)
    model = ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(3), attention_backend="xla")
    video, audio = inputs(cfg)
    types = PerturbationType
    mixed = BatchedPerturbationConfig((
        PerturbationConfig((
            Perturbation(types.SKIP_A2V_CROSS_ATTN, None),
            Perturbation(types.SKIP_VIDEO_SELF_ATTN, (1,)),
        )),
        PerturbationConfig((
            Perturbation(types.SKIP_A2V_CROSS_ATTN, (2,)),
            Perturbation(types.SKIP_V2A_CROSS_ATTN, (0,)),
            Perturbation(types.SKIP_AUDIO_SELF_ATTN, (3,)),
        )),
    ))  # fmt: skip
    sp = SequenceParallel(model, make_mesh(4))
    assert_same(sp(video, audio, mixed), single_device(model, video, audio, mixed))
    assert sp.compiled() == {"whole": 0, "prepare": 1, "block": 2, "finish": 1}


def test_compiled_ahead_from_shapes_is_not_compiled_again(model):
    """`compile_ahead` from shapes alone (50 tokens: padded to 56 on 8 devices, with a perturbed block)
    compiles every program the call then runs: the call compiles nothing and gives the forward's output."""
    video, audio = inputs()
    stg = BatchedPerturbationConfig(
        (PerturbationConfig(), PerturbationConfig((Perturbation(PerturbationType.SKIP_VIDEO_SELF_ATTN, (1,)),)))
    )
    sp = SequenceParallel(model, make_mesh(8))
    sp.compile_ahead(*jax.eval_shape(lambda: (video, audio)), stg)
    with CompileThreads() as threads:
        out = sp(video, audio, stg)
    programs = {"jit(pad_video)", "jit(prepare_local)", "jit(run)", "jit(finish_local)"}
    assert not programs & {name for _, name in threads.compiled}  # (eager slicing of the output may compile)
    assert sp.compiled() == {"whole": 0, "prepare": 1, "block": 1, "finish": 1}
    assert_same(out, single_device(model, video, audio, stg))


def test_heads_not_divisible(model):
    with pytest.raises(ValueError, match=r"num_attention_heads \(8\) must be divisible by the mesh size \(3\)"):
        SequenceParallel(model, make_mesh(3))


def test_audio_heads_not_divisible():
    cfg = dataclasses.replace(CFG, audio_num_attention_heads=4, audio_attention_head_dim=8)
    model = ltx_jax.LTXModel(cfg, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match=r"audio_num_attention_heads \(4\) must be divisible by the mesh size \(8\)"):
        SequenceParallel(model, make_mesh(8))


def test_max_tokens(model):
    sp = SequenceParallel(model, make_mesh(8), max_tokens=48)
    sp(*inputs(tokens=48))
    with pytest.raises(ValueError, match=r"Total video token count \(56\) exceeds max_tokens \(48\)\. Use a smaller"):
        sp(*inputs(tokens=49))


def test_mesh_larger_than_devices():
    with pytest.raises(ValueError, match=r"a mesh of 16 devices needs 16 devices but 8 are present"):
        make_mesh(16)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"strategy": "zigzag"}, r"strategy must be one of \['ulysses', 'allgather_kv', 'ring', 'usp'\], got 'zigzag'"),
        ({"backend": "nccl"}, r"backend must be one of \['all_to_all', 'ffi'\], got 'nccl'"),
        (
            {"backend": "ffi"},
            r"backend='ffi' runs on CUDA GPUs; this mesh's devices are \['cpu'\]. Use backend='all_to_all'",
        ),
    ],
)
def test_bad_arguments(model, kwargs, message):
    with pytest.raises(ValueError, match=message):
        SequenceParallel(model, make_mesh(2), **kwargs)


def test_wrong_latent_width_is_caught_before_device_work(model):
    video, audio = inputs()
    with pytest.raises(ValueError, match=r"video\.latent must be \(B, T, 16\)"):
        SequenceParallel(model, make_mesh(2))(dataclasses.replace(video, latent=video.latent[..., :8]), audio)
