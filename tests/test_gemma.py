"""Gemma 3 text encoder against transformers + ltx-core 1.0.0 (CPU float32): every hidden state, the
checkpoint key layouts, the tokenizer, the prompt cache and sharding over 8 simulated devices."""

import dataclasses
import json

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from ltx_core.text_encoders.gemma.config import GEMMA3_CONFIG_FOR_LTX
from ltx_core.text_encoders.gemma.encoders.base_encoder import GemmaTextEncoder as TorchGemmaTextEncoder
from ltx_core.text_encoders.gemma.tokenizer import LTXVGemmaTokenizer
from ltx_core_twin import relative_error
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from tolerances import FLOAT32
from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig, Gemma3TextModel

from ltx_jax.convert.state_dict import expected_keys
from ltx_jax.parallel import make_mesh
from ltx_jax.text_encoders.gemma import EMBEDDINGS_PROCESSOR_KEY_MAP, EmbeddingsProcessorConfigurator
from ltx_jax.text_encoders.gemma.encoders import (
    Gemma3ModelConfig,
    GemmaTextEncoder,
    abstract_gemma,
    base_encoder,
    gemma_text_state_dict,
    load_gemma_state_dict,
    read_gemma_config,
    shard_gemma,
)
from ltx_jax.text_encoders.gemma.encoders import Gemma3TextModel as JaxGemma3TextModel
from ltx_jax.text_encoders.gemma.prompt_cache import PromptCache
from ltx_jax.text_encoders.gemma.prompt_encoder import PromptEncoder, build_prompt_encoder
from ltx_jax.text_encoders.gemma.tokenizer import LTXGemmaTokenizer

BRANCH_EFFECT = 1e-3  # a config detail that matters moves some hidden state by far more than the tolerance

SEQ, PAD_COUNTS = 12, (4, 0)  # left-padded batch of 2; SEQ exceeds the sliding window
TEXT = {
    "vocab_size": 384,  # the test tokenizer: 5 specials, ~115 merges, 256 byte tokens
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 8,
    "query_pre_attn_scalar": 12,  # differs from head_dim, so the scale is tested
    "sliding_window": 5,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention", "sliding_attention"],
    "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
    },
}
TINY_VISION = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]
CORPUS = ["a cat walks on the beach at sunset", "the quick brown fox jumps over the lazy dog", "waves crash"] * 4
PROMPTS = ["  a cat walks on the beach.  ", "", "ünï ☃ x", "hello <bos> world<eos>", "a  b", " ".join(CORPUS)]


def perturb_norms(model: torch.nn.Module) -> torch.nn.Module:
    """transformers starts Gemma's RMSNorm weights at zero (scale 1); random ones make each norm matter."""
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_(0.5 * torch.randn_like(param))
    return model


def hf_text_model() -> Gemma3TextModel:
    torch.manual_seed(0)
    return perturb_norms(Gemma3TextModel(Gemma3TextConfig(**TEXT, num_hidden_layers=4)).eval())


def jax_model(reference: torch.nn.Module, cfg: Gemma3ModelConfig | None = None, prefix: str = "") -> JaxGemma3TextModel:
    cfg = cfg or Gemma3ModelConfig.from_hf_dict(reference.config.to_dict())
    sd = {prefix + k: v for k, v in reference.state_dict().items()}
    return load_gemma_state_dict(JaxGemma3TextModel(cfg, rngs=nnx.Rngs(0)), sd)


def batch(seed: int = 0, pad_counts: tuple[int, ...] = PAD_COUNTS) -> tuple[np.ndarray, np.ndarray]:
    ids = np.random.default_rng(seed).integers(0, TEXT["vocab_size"], (len(pad_counts), SEQ))
    mask = np.stack([np.arange(SEQ) >= p for p in pad_counts]).astype(np.int64)
    return ids, mask


def reference_hidden_states(model: Gemma3TextModel, ids: np.ndarray, mask: np.ndarray) -> tuple[torch.Tensor, ...]:
    with torch.no_grad():
        out = model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask), output_hidden_states=True)
    return out.hidden_states


def errors(ours: tuple, reference: tuple) -> list[float]:
    assert len(ours) == len(reference)
    return [relative_error(np.asarray(a), b) for a, b in zip(ours, reference, strict=True)]


def test_hidden_states_parity():
    """Embeddings, every layer output and the final norm, at every position of a left-padded batch
    (padded positions included: ours give zero attention there, as transformers' SDPA does)."""
    reference = hf_text_model()
    ids, mask = batch()
    ours = jax_model(reference)(jnp.asarray(ids), jnp.asarray(mask))
    assert max(errors(ours, reference_hidden_states(reference, ids, mask))) <= FLOAT32


@pytest.mark.parametrize(
    "change",
    [
        {"sliding_window": SEQ},
        {"rope_scaling_factor": 1.0},
        {"rope_local_base_freq": 1e6},
        {"query_pre_attn_scalar": 8},
    ],
)
def test_each_config_detail_matters(change):
    reference = hf_text_model()
    cfg = dataclasses.replace(Gemma3ModelConfig.from_hf_dict(reference.config.to_dict()), **change)
    ids, mask = batch()
    ours = jax_model(reference, cfg)(jnp.asarray(ids), jnp.asarray(mask))
    assert max(errors(ours, reference_hidden_states(reference, ids, mask))) > BRANCH_EFFECT


def test_config_reads_both_transformers_formats():
    """ltx-core 1.0.0's 12B dict (transformers 4.x fields) and transformers 5's normalized one agree."""
    legacy = GEMMA3_CONFIG_FOR_LTX.to_dict()
    cfg = Gemma3ModelConfig.from_hf_dict(legacy)
    assert cfg == Gemma3ModelConfig.from_hf_dict(Gemma3Config.from_dict(legacy).to_dict())
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.rope_scaling_factor, cfg.sliding_window) == (
        48,
        3840,
        8.0,
        1024,
    )
    assert [i for i, kind in enumerate(cfg.layer_types) if kind == "full_attention"] == list(range(5, 48, 6))
    with pytest.raises(ValueError, match="attn_logit_softcapping"):
        Gemma3ModelConfig.from_hf_dict({**legacy["text_config"], "attn_logit_softcapping": 50.0})
    with pytest.raises(ValueError, match="rope_type"):
        Gemma3ModelConfig.from_hf_dict({**legacy["text_config"], "rope_scaling": {"rope_type": "yarn", "factor": 2}})


def multimodal_state_dict(legacy_layout: bool) -> tuple[Gemma3ForConditionalGeneration, dict]:
    """A tiny `Gemma3ForConditionalGeneration` and its keys as transformers 5 names them, or as the
    LTX-2 Gemma directory (transformers 4.51) does: `language_model.model.*`, `vision_tower.*`."""
    torch.manual_seed(0)
    cfg = Gemma3Config(text_config={**TEXT, "num_hidden_layers": 4}, vision_config=TINY_VISION, mm_tokens_per_image=4)
    model = perturb_norms(Gemma3ForConditionalGeneration(cfg).eval())
    renames = (
        ("model.language_model.", "language_model.model."),
        ("model.", ""),
        ("lm_head.", "language_model.lm_head."),
    )
    sd = {}
    for key, value in model.state_dict().items():
        old, new = next(((o, n) for o, n in renames if key.startswith(o)), ("", "")) if legacy_layout else ("", "")
        sd[new + key[len(old) :]] = value
    return model, sd


@pytest.mark.parametrize("legacy_layout", [True, False])
def test_multimodal_checkpoint_loads_text_part(legacy_layout):
    model, sd = multimodal_state_dict(legacy_layout)
    assert any("vision_tower." in k for k in sd)
    assert any("lm_head" in k for k in sd)
    ours = jax_model(model.model.language_model)
    loaded = load_gemma_state_dict(abstract_gemma(ours.config, jnp.float32), sd)  # shape-only model filled in
    ids, mask = batch()
    assert max(errors(loaded(jnp.asarray(ids), jnp.asarray(mask)), ours(jnp.asarray(ids), jnp.asarray(mask)))) == 0


def test_strict_loading_errors():
    _, sd = multimodal_state_dict(legacy_layout=True)
    cfg = Gemma3ModelConfig.from_hf_dict({**TEXT, "num_hidden_layers": 4})
    with pytest.raises(ValueError, match=r"1 unknown keys: language_model\.model\.extra\.weight"):
        gemma_text_state_dict({**sd, "language_model.model.extra.weight": torch.zeros(1)})
    with pytest.raises(ValueError, match=r"1 duplicated: norm\.weight"):
        gemma_text_state_dict({**sd, "model.language_model.norm.weight": torch.zeros(32)})
    missing = {k: v for k, v in sd.items() if k != "language_model.model.layers.2.mlp.up_proj.weight"}
    with pytest.raises(ValueError, match=r"1 missing keys: layers\.2\.mlp\.up_proj\.weight"):
        load_gemma_state_dict(JaxGemma3TextModel(cfg, rngs=nnx.Rngs(0)), missing)
    wider = dataclasses.replace(cfg, intermediate_size=64)
    with pytest.raises(ValueError, match="wrong shapes"):
        load_gemma_state_dict(JaxGemma3TextModel(wider, rngs=nnx.Rngs(0)), sd)


def write_tokenizer(root, *, tokenizer_class="GemmaTokenizer", bos_in_template=True, config_extra=None) -> None:
    """A small Gemma-like BPE (byte fallback, "▁" for spaces, <bos> template) saved as tokenizer.json and
    tokenizer_config.json, so both transformers' AutoTokenizer and ours read the same files."""
    trained = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    trained.normalizer = normalizers.Replace(" ", "▁")
    trained.pre_tokenizer = pre_tokenizers.Split(" ", behavior="merged_with_previous")
    trained.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=120, special_tokens=SPECIALS))
    spec = json.loads(trained.to_str())["model"]
    vocab = {**spec["vocab"]}
    for byte in range(256):
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["merges"]]
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer, tok.pre_tokenizer = trained.normalizer, trained.pre_tokenizer
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    tok.add_special_tokens(SPECIALS)
    template = "<bos> $A" if bos_in_template else "$A"
    tok.post_processor = processors.TemplateProcessing(single=template, special_tokens=[("<bos>", 2)])
    tok.save(str(root / "tokenizer.json"))
    config = {"tokenizer_class": tokenizer_class, "bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>"}
    (root / "tokenizer_config.json").write_text(json.dumps({**config, **(config_extra or {})}))


def reference_tokens(root, text: str, max_length: int) -> list[tuple[int, int]]:
    pairs = LTXVGemmaTokenizer(str(root), max_length).tokenize_with_weights(text)["gemma"]
    return [(int(t), int(w)) for t, w in pairs]


@pytest.mark.parametrize(
    ("tokenizer_class", "config_extra"),
    [
        ("GemmaTokenizer", {"pad_token": "<pad>", "add_bos_token": True, "add_eos_token": False}),
        ("PreTrainedTokenizerFast", {}),  # no pad token: pad = eos; BOS from tokenizer.json's template
    ],
)
def test_tokenizer_matches_ltx_core(tmp_path, tokenizer_class, config_extra):
    write_tokenizer(tmp_path, tokenizer_class=tokenizer_class, config_extra=config_extra)
    ours = LTXGemmaTokenizer.from_root(tmp_path, max_length=16)
    for text in PROMPTS:
        assert ours.tokenize_with_weights(text)["gemma"] == reference_tokens(tmp_path, text, 16), text
    assert ours.tokenize(PROMPTS)[0][-1, 0] == 2  # the long prompt is truncated, BOS kept
    assert ours.pad_token_id == (0 if config_extra else 1)


def test_tokenizer_ensures_bos(tmp_path):
    """Upstream prepends BOS when the tokenizer does not add it (1.0.0 did not): one BOS, then the same ids."""
    write_tokenizer(tmp_path, tokenizer_class="PreTrainedTokenizerFast", bos_in_template=False)
    ids, mask = LTXGemmaTokenizer.from_root(tmp_path, max_length=16).tokenize(["a cat walks"])
    reference = [t for t, w in reference_tokens(tmp_path, "a cat walks", 16) if w]
    assert ids[0][mask[0] == 1].tolist() == [2, *reference]


def gemma_root(tmp_path, legacy_layout: bool = True) -> tuple[Gemma3ForConditionalGeneration, object]:
    """A Gemma directory like LTX-2's: config.json, two safetensors shards, tokenizer files."""
    model, sd = multimodal_state_dict(legacy_layout)
    keys = sorted(sd)
    save_file({k: sd[k].contiguous() for k in keys[::2]}, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file({k: sd[k].contiguous() for k in keys[1::2]}, str(tmp_path / "model-00002-of-00002.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(model.config.to_dict()))
    write_tokenizer(tmp_path, config_extra={"pad_token": "<pad>", "add_bos_token": True})
    return model, tmp_path


def test_text_encoder_matches_ltx_core(tmp_path):
    """ltx-core's GemmaTextEncoder (tokenizer + Gemma3ForConditionalGeneration) vs ours from the same directory."""
    model, root = gemma_root(tmp_path)
    reference = TorchGemmaTextEncoder(model=model, tokenizer=LTXVGemmaTokenizer(str(root), 16), dtype=torch.float32)
    with torch.no_grad():
        expected, expected_mask = reference.encode(PROMPTS[0])
    ours = GemmaTextEncoder.from_root(root, param_dtype=jnp.float32, max_length=16)
    compiled_layers = base_encoder._layer._cache_size()
    hidden, mask = ours.encode([PROMPTS[0]])
    assert base_encoder._layer._cache_size() - compiled_layers <= 1  # one program for the 4 layers (both kinds)
    np.testing.assert_array_equal(mask, expected_mask.numpy())
    assert hidden.shape == (1, 16, 32, 5)
    assert max(errors(tuple(jnp.moveaxis(hidden, -1, 0)), expected)) <= FLOAT32


def test_sharded_equals_unsharded(tmp_path):
    model, root = gemma_root(tmp_path, legacy_layout=False)
    mesh = make_mesh(8)
    single = GemmaTextEncoder.from_root(root, param_dtype=jnp.float32, max_length=16)
    loaded_sharded = GemmaTextEncoder.from_root(root, param_dtype=jnp.float32, mesh=mesh, max_length=16)
    moved = GemmaTextEncoder(shard_gemma(nnx.clone(single.model), mesh), single.tokenizer)
    q_proj = loaded_sharded.model.layers[0].self_attn.q_proj.kernel[...]
    assert q_proj.sharding.spec != ()
    assert len(q_proj.addressable_shards) == 8
    assert (
        moved.model.embed_tokens.weight[...].sharding.spec
        == loaded_sharded.model.embed_tokens.weight[...].sharding.spec
    )
    expected, _ = single.encode(PROMPTS[:2])
    for encoder in (loaded_sharded, moved):
        assert relative_error(encoder.encode(PROMPTS[:2])[0], np.asarray(expected)) <= FLOAT32


PROCESSOR_CONFIG = {  # V2 feature extractor, tiny connectors
    "transformer": {
        "caption_proj_before_connector": True,
        "caption_projection_first_linear": False,
        "caption_proj_input_norm": False,
        "caption_projection_second_linear": False,
        **{"num_attention_heads": 2, "attention_head_dim": 8, "audio_num_attention_heads": 2},
        **{"audio_attention_head_dim": 4, "connector_attention_head_dim": 8, "audio_connector_attention_head_dim": 4},
        **{"connector_num_attention_heads": 2, "audio_connector_num_attention_heads": 2, "connector_num_layers": 1},
    }
}


def checkpoint_tensors(processor: nnx.Module) -> dict[str, np.ndarray]:
    """A processor's weights under the LTX checkpoint's key names (torch layout)."""
    inverse = {target: source for source, target in EMBEDDINGS_PROCESSOR_KEY_MAP}
    flat = dict(nnx.to_flat_state(nnx.state(processor, nnx.Param)))
    out = {}
    for key, (path, transposed, _, _) in expected_keys(processor).items():
        value = np.asarray(flat[path].get_value())
        target = next(t for t in inverse if key.startswith(t))
        out[inverse[target] + key[len(target) :]] = value.T if transposed else value
    return out


def test_build_prompt_encoder_and_cache(tmp_path, monkeypatch):
    """Gemma directory + LTX checkpoint tensors -> contexts (128 tokens: the connectors' 128 registers);
    a second call reads the cache file, another prompt or checkpoint misses."""
    (tmp_path / "gemma").mkdir()
    _, root = gemma_root(tmp_path / "gemma")
    ltx_file = tmp_path / "ltx.safetensors"
    save_file({"x": torch.zeros(1)}, str(ltx_file))
    processor = EmbeddingsProcessorConfigurator.from_config(PROCESSOR_CONFIG, embedding_dim=32, num_layers=5)
    kw = {"gemma_dtype": jnp.float32, "cache_dir": tmp_path / "cache", "ltx_checkpoint_path": ltx_file}
    encoder = build_prompt_encoder(root, PROCESSOR_CONFIG, checkpoint_tensors(processor), max_length=128, **kw)
    first = encoder.encode_prompt("a cat")
    direct = PromptEncoder(encoder.text_encoder, processor).encode_prompt("a cat")
    for a, b in zip(first, direct, strict=True):
        np.testing.assert_array_equal(a, b)
    assert first.video_encoding.shape == (1, 128, 16)
    assert first.audio_encoding.shape == (1, 128, 8)

    def cache_files() -> int:
        return len(list((tmp_path / "cache").glob("*.npz")))

    assert cache_files() == 1

    def no_gemma(prompts):
        raise AssertionError(f"Gemma ran for {prompts}")

    monkeypatch.setattr(encoder.text_encoder, "encode", no_gemma)
    for a, b in zip(encoder.encode_prompt("a cat"), first, strict=True):  # read from the file
        np.testing.assert_array_equal(a, b)
    monkeypatch.undo()
    encoder.encode_prompts(["a dog", "a cat"])  # one miss
    assert cache_files() == 2
    other_checkpoint = PromptCache(tmp_path / "cache", checkpoint_id="other", max_length=128)
    PromptEncoder(encoder.text_encoder, encoder.processor, other_checkpoint).encode_prompt("a cat")
    assert cache_files() == 3


def test_bad_inputs_raise(tmp_path):
    cfg = Gemma3ModelConfig.from_hf_dict({**TEXT, "num_hidden_layers": 4})
    with pytest.raises(ValueError, match="must both be"):
        JaxGemma3TextModel(cfg, rngs=nnx.Rngs(0))(jnp.zeros((2, 4), jnp.int32), jnp.ones((2, 5), jnp.int32))
    with pytest.raises(ValueError, match="multiple of"):
        dataclasses.replace(cfg, num_key_value_heads=3)
    write_tokenizer(tmp_path)
    with pytest.raises(TypeError, match="list of strings"):
        LTXGemmaTokenizer.from_root(tmp_path).tokenize("a cat")
    with pytest.raises(FileNotFoundError, match="config.json"):
        read_gemma_config(tmp_path)
    with pytest.raises(ValueError, match="checkpoint_id"):
        PromptCache(tmp_path, checkpoint_id="", max_length=16)
