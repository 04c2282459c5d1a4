"""Feature extractors, embeddings connectors and the embeddings processor against ltx-core 1.0.0 (CPU).

ltx-core 1.0.0's connector handles one left-padded sample at a time (a larger batch raises an
IndexError there), so batched results are compared with the reference run sample by sample.
"""

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from ltx_core.model.transformer.rope import LTXRopeType
from ltx_core.text_encoders.gemma import embeddings_processor as torch_processor
from ltx_core.text_encoders.gemma import feature_extractor as torch_fe
from ltx_core.text_encoders.gemma.embeddings_connector import Embeddings1DConnector as TorchConnector
from ltx_core_twin import relative_error
from tolerances import FLOAT32

import ltx_jax
from ltx_jax.model.attention_backends import xla_attention
from ltx_jax.text_encoders.gemma import (
    Embeddings1DConnector,
    EmbeddingsProcessor,
    EmbeddingsProcessorConfigurator,
    FeatureExtractorV1,
    FeatureExtractorV2,
    convert_to_additive_mask,
    embeddings_processor_state_dict,
)
from ltx_jax.text_encoders.gemma.embeddings_processor import apply_right_pad_order, compute_right_pad_order

BRANCH_EFFECT = 1e-3  # a branch that matters moves the output by far more than the tolerance

GEMMA_DIM, GEMMA_LAYERS, SEQ = 16, 3, 128
REGISTERS = 4  # connector tests: tiled 32 times over the sequence (the processors have ltx-core's 128)
PAD_COUNTS = (37, 0)  # left padding per sample: one padded prompt, one that fills the sequence
CONNECTOR = {"attention_head_dim": 8, "num_attention_heads": 2, "num_layers": 2, "positional_embedding_max_pos": [4096]}
CONNECTOR_VARIANTS = {
    "split": {"rope_type": "split"},
    "interleaved": {"rope_type": "interleaved"},
    "gated_f64_rope": {"rope_type": "split", "apply_gated_attention": True, "double_precision_rope": True},
    "max_pos_default": {"rope_type": "split", "positional_embedding_max_pos": None},
}


def torch_connector(seed: int = 0, num_learnable_registers: int | None = REGISTERS, **kwargs) -> TorchConnector:
    """1.0.0's connector with random weights; the q/k RMSNorm weights are moved away from ones."""
    kwargs = {**CONNECTOR, **kwargs, "rope_type": LTXRopeType(kwargs.get("rope_type", "split"))}
    torch.manual_seed(seed)
    model = TorchConnector(num_learnable_registers=num_learnable_registers, **kwargs).float().eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_(1.0 + 0.3 * torch.randn_like(param))
    return model


def jax_connector(reference: TorchConnector, **kwargs) -> Embeddings1DConnector:
    kwargs = {**CONNECTOR, **kwargs, "num_learnable_registers": reference.num_learnable_registers}
    model = Embeddings1DConnector(**kwargs, rngs=nnx.Rngs(1))
    return ltx_jax.load_state_dict(model, reference.state_dict(), prefix="")


def left_padded_mask(pad_counts=PAD_COUNTS, seq=SEQ) -> np.ndarray:
    return np.stack([np.arange(seq) >= pad for pad in pad_counts]).astype(np.int64)


def randn(*shape, seed=0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def per_sample(fn, *arrays):
    """Runs a torch function sample by sample (1.0.0's connector takes one sample) and concatenates."""
    with torch.no_grad():
        outs = [fn(*(torch.from_numpy(np.array(a[i : i + 1])) for a in arrays)) for i in range(arrays[0].shape[0])]
    if isinstance(outs[0], torch.Tensor):
        return torch.cat(outs)
    return [None if o[0] is None else torch.cat(list(o)) for o in zip(*outs, strict=True)]


def assert_close(ours, reference):
    assert ours.shape == tuple(reference.shape)
    assert relative_error(ours, reference) <= FLOAT32, f"relative error {relative_error(ours, reference):.2e}"


@pytest.mark.parametrize("variant", CONNECTOR_VARIANTS)
def test_connector_registers_parity(variant):
    """Left-padded input: 1.0.0 moves the valid tokens to the front itself; ours gets them moved."""
    kwargs = CONNECTOR_VARIANTS[variant]
    reference = torch_connector(**kwargs)
    x, mask = randn(2, SEQ, 16), left_padded_mask()
    additive = np.asarray(convert_to_additive_mask(jnp.asarray(mask), jnp.float32))
    expected = per_sample(lambda h, m: reference(h, m)[0], x, additive)

    sort_idx, right_padded = compute_right_pad_order(jnp.asarray(additive))
    ours, out_mask = jax_connector(reference, **kwargs)(
        apply_right_pad_order(jnp.asarray(x), sort_idx), right_padded, attention_fn=xla_attention
    )
    assert_close(ours, expected)
    assert not np.asarray(out_mask).any()
    with torch.no_grad():
        reference.learnable_registers.zero_()
    assert relative_error(ours, per_sample(lambda h, m: reference(h, m)[0], x, additive)) > BRANCH_EFFECT


def test_connector_without_registers_masks_attention():
    """No registers: the padding mask reaches attention and comes back unchanged."""
    reference = torch_connector(num_learnable_registers=None)
    x, mask = randn(2, SEQ, 16), left_padded_mask()
    additive = convert_to_additive_mask(jnp.asarray(mask), jnp.float32)
    expected, expected_mask = per_sample(reference, x, np.asarray(additive))
    ours, ours_mask = jax_connector(reference)(jnp.asarray(x), additive, attention_fn=xla_attention)
    assert_close(ours, expected)
    np.testing.assert_array_equal(ours_mask, expected_mask.numpy())
    unmasked = jax_connector(reference)(jnp.asarray(x), attention_fn=xla_attention)[0]
    assert relative_error(unmasked, expected) > BRANCH_EFFECT


def test_connector_without_ff_bias():
    """Upstream's ff_bias=False equals 1.0.0's connector with zero feed-forward biases."""
    reference = torch_connector(num_learnable_registers=None)
    with torch.no_grad():
        for name, param in reference.named_parameters():
            if ".ff." in name and name.endswith("bias"):
                param.zero_()
    state = {k: v for k, v in reference.state_dict().items() if not (".ff." in k and k.endswith("bias"))}
    model = Embeddings1DConnector(**CONNECTOR, num_learnable_registers=None, ff_bias=False, rngs=nnx.Rngs(1))
    ltx_jax.load_state_dict(model, state, prefix="")
    x = randn(1, SEQ, 16)
    with torch.no_grad():
        expected, _ = reference(torch.from_numpy(x))
    assert_close(model(jnp.asarray(x), attention_fn=xla_attention)[0], expected)


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_feature_extractor_parity(version):
    hidden, mask = randn(2, SEQ, GEMMA_DIM, GEMMA_LAYERS), left_padded_mask()
    torch.manual_seed(0)
    flat = GEMMA_DIM * GEMMA_LAYERS
    if version == "v1":
        reference = torch_fe.FeatureExtractorV1(torch.nn.Linear(flat, GEMMA_DIM, bias=False), is_av=True)
        ours = FeatureExtractorV1(GEMMA_DIM, GEMMA_LAYERS, is_av=True, rngs=nnx.Rngs(1))
    else:
        video, audio = torch.nn.Linear(flat, 24), torch.nn.Linear(flat, 16)
        reference = torch_fe.FeatureExtractorV2(video, GEMMA_DIM, audio)
        ours = FeatureExtractorV2(GEMMA_DIM, GEMMA_LAYERS, video_dim=24, audio_dim=16, rngs=nnx.Rngs(1))
    ltx_jax.load_state_dict(ours, reference.state_dict(), prefix="")
    with torch.no_grad():
        expected = reference(torch.from_numpy(hidden), torch.from_numpy(mask), "left")
    layers = [jnp.asarray(hidden[..., i]) for i in range(GEMMA_LAYERS)]  # Gemma's per-layer tuple
    for o, e in zip(ours(layers, jnp.asarray(mask)), expected, strict=True):
        assert_close(o, e)


def torch_processor_twin(version: str) -> torch_processor.EmbeddingsProcessor:
    torch.manual_seed(0)
    flat = GEMMA_DIM * GEMMA_LAYERS
    if version == "v1":
        fe = torch_fe.FeatureExtractorV1(torch.nn.Linear(flat, GEMMA_DIM, bias=False), is_av=True)
        video = torch_connector(seed=1, num_learnable_registers=128)
        audio = torch_connector(seed=2, num_learnable_registers=128)
    else:
        fe = torch_fe.FeatureExtractorV2(torch.nn.Linear(flat, 24), GEMMA_DIM, torch.nn.Linear(flat, 16))
        video = torch_connector(seed=1, num_learnable_registers=128, attention_head_dim=12, apply_gated_attention=True)
        audio = torch_connector(seed=2, num_learnable_registers=128, apply_gated_attention=True)
    return torch_processor.EmbeddingsProcessor(feature_extractor=fe, video_connector=video, audio_connector=audio)


def processor_config(version: str) -> dict:
    """A checkpoint `config` for the tiny processors above (V2 keys as LTX-2.3 writes them)."""
    transformer = {
        "rope_type": "split",
        "connector_num_attention_heads": 2,
        "connector_attention_head_dim": 8,
        "connector_num_layers": 2,
        "connector_positional_embedding_max_pos": [4096],
    }
    if version == "v2":
        transformer |= {
            "caption_proj_before_connector": True,
            "caption_projection_first_linear": False,
            "caption_proj_input_norm": False,
            "caption_projection_second_linear": False,
            "num_attention_heads": 2,
            "attention_head_dim": 12,
            "audio_num_attention_heads": 2,
            "audio_attention_head_dim": 8,
            "connector_attention_head_dim": 12,
            "audio_connector_attention_head_dim": 8,
            "connector_apply_gated_attention": True,
        }
    return {"transformer": transformer}


def checkpoint_keys(reference: torch_processor.EmbeddingsProcessor) -> dict:
    """The reference's weights under the monolithic checkpoint's key names, plus an unrelated DiT key."""
    inverse = {t: s for s, t in ltx_jax.text_encoders.gemma.EMBEDDINGS_PROCESSOR_KEY_MAP}
    out = {"model.diffusion_model.transformer_blocks.0.attn1.to_q.weight": torch.zeros(1)}
    for key, value in reference.state_dict().items():
        target = next(t for t in inverse if key.startswith(t))
        out[inverse[target] + key[len(target) :]] = value
    return out


def jax_processor(version: str, reference: torch_processor.EmbeddingsProcessor) -> EmbeddingsProcessor:
    model = EmbeddingsProcessorConfigurator.from_config(
        processor_config(version), embedding_dim=GEMMA_DIM, num_layers=GEMMA_LAYERS, rngs=nnx.Rngs(3)
    )
    return ltx_jax.load_state_dict(model, embeddings_processor_state_dict(checkpoint_keys(reference)), prefix="")


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_processor_parity(version):
    """Gemma hidden states -> video/audio contexts and mask, left-padded batch, from checkpoint keys."""
    reference = torch_processor_twin(version)
    hidden, mask = randn(2, SEQ, GEMMA_DIM, GEMMA_LAYERS), left_padded_mask()
    expected = per_sample(lambda h, m: reference.process_hidden_states(h, m, "left"), hidden, mask)
    ours = jax_processor(version, reference).process_hidden_states(
        jnp.asarray(hidden), jnp.asarray(mask), attention_fn=xla_attention
    )
    assert_close(ours.video_encoding, expected[0])
    assert_close(ours.audio_encoding, expected[1])
    np.testing.assert_array_equal(ours.attention_mask, expected[2].numpy())
    assert ours.video_encoding.shape[-1] == (24 if version == "v2" else GEMMA_DIM)


def test_processor_right_padding_equals_left_padding():
    """Upstream's reorder makes the padding side irrelevant (1.0.0 supported left padding only)."""
    reference = torch_processor_twin("v2")
    model = jax_processor("v2", reference)
    hidden, mask = randn(2, SEQ, GEMMA_DIM, GEMMA_LAYERS), left_padded_mask()
    right_hidden = np.stack([np.roll(hidden[i], -p, axis=0) for i, p in enumerate(PAD_COUNTS)])
    right_mask = np.stack([np.roll(mask[i], -p) for i, p in enumerate(PAD_COUNTS)])
    left = model.process_hidden_states(jnp.asarray(hidden), jnp.asarray(mask), attention_fn=xla_attention)
    right = model.process_hidden_states(jnp.asarray(right_hidden), jnp.asarray(right_mask), attention_fn=xla_attention)
    for a, b in zip(left, right, strict=True):
        assert relative_error(b, np.asarray(a)) <= FLOAT32


def test_configurator_builds_checkpoint_layout():
    config = {"transformer": {"connector_num_layers": 1}}
    v1 = nnx.eval_shape(lambda: EmbeddingsProcessorConfigurator.from_config(config))  # full size, no memory
    assert isinstance(v1.feature_extractor, FeatureExtractorV1)
    assert v1.feature_extractor.aggregate_embed.kernel.shape == (3840 * 49, 3840)  # Gemma 3 12B defaults
    assert v1.video_connector.learnable_registers.shape == (128, 30 * 128)
    assert v1.video_connector.rope_type == "split"  # upstream's default; 1.0.0 defaulted to interleaved


@pytest.mark.parametrize(
    ("transformer", "message"),
    [
        ({"caption_proj_before_connector": True}, "missing"),
        ({**processor_config("v2")["transformer"], "caption_proj_input_norm": True}, "unexpected values"),
        ({"connector_num_learnable_registers": 64}, "connector_num_learnable_registers=64"),
    ],
)
def test_bad_config_raises(transformer, message):
    with pytest.raises(ValueError, match=message):
        EmbeddingsProcessorConfigurator.from_config({"transformer": transformer}, embedding_dim=16, num_layers=3)


def test_bad_inputs_raise():
    model = Embeddings1DConnector(**CONNECTOR, num_learnable_registers=REGISTERS, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="multiple of num_learnable_registers"):
        model(jnp.zeros((1, 6, 16)), jnp.zeros((1, 1, 1, 6)))
    with pytest.raises(ValueError, match="width 12"):
        model(jnp.zeros((1, 8, 12)))
    with pytest.raises(ValueError, match="additive_attention_mask has shape"):
        model(jnp.zeros((1, 8, 16)), jnp.zeros((1, 8)))
