"""Gemma 3 generation with a KV cache against transformers' `generate` (CPU, float32, tiny random models):
the same greedy tokens and per-step logits for 32 steps (text, and text with an image), the stop
tokens, sampling's distribution, and a run with the weights split over 8 devices."""

from collections.abc import Callable

import jax
import numpy as np
import pytest
import torch
from flax import nnx
from tolerances import GEMMA_LOGITS
from transformers import Gemma3Config, Gemma3ForCausalLM, Gemma3ForConditionalGeneration, Gemma3TextConfig

from ltx_jax.parallel import make_mesh
from ltx_jax.text_encoders.gemma.encoders import (
    Gemma3ModelConfig,
    Gemma3TextModel,
    Gemma3VisionConfig,
    Gemma3VisionTower,
    load_gemma_state_dict,
    load_gemma_vision_state_dict,
    shard_gemma,
)
from ltx_jax.text_encoders.gemma.encoders.gemma3_generate import GREEDY, Gemma3Generator, Sampling, choose

TEXT = {
    "vocab_size": 96, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 8, "query_pre_attn_scalar": 8, "sliding_window": 8,
    "sliding_window_pattern": 2, "max_position_embeddings": 256, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
}  # fmt: skip
PROMPT = [2, 5, 17, 33, 40, 9, 12, 70, 3, 28, 61]  # 11 tokens + 32 new: the 8-token sliding window is crossed


def randomize(build: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    """`build()` under a fixed seed (its init draws from torch's global generator), then noise on every
    weight but the (tied) embeddings: the default init makes a tiny model repeat one token."""
    torch.manual_seed(0)
    model = build()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "embed_tokens" not in name:
                param.add_(0.5 * torch.randn_like(param))
    return model.eval()


def ours(hf_config: dict, state_dict: dict) -> Gemma3TextModel:
    model = Gemma3TextModel(Gemma3ModelConfig.from_hf_dict(hf_config), rngs=nnx.Rngs(0))
    text = {k: v.numpy() for k, v in state_dict.items() if "vision" not in k and "multi_modal" not in k}
    return load_gemma_state_dict(model, text, progress=False)


@pytest.fixture(scope="module")
def text_models() -> tuple[Gemma3ForCausalLM, Gemma3TextModel]:
    reference = randomize(lambda: Gemma3ForCausalLM(Gemma3TextConfig(**TEXT, eos_token_id=None, pad_token_id=0)))
    return reference, ours(reference.config.to_dict(), reference.state_dict())


def reference_greedy(model: torch.nn.Module, steps: int, **inputs: torch.Tensor) -> tuple[list[int], np.ndarray]:
    out = model.generate(
        **inputs, max_new_tokens=steps, do_sample=False, output_logits=True, return_dict_in_generate=True
    )
    prompt_length = inputs["input_ids"].shape[1]
    return out.sequences[0, prompt_length:].tolist(), torch.stack(out.logits, 1)[0].numpy()


def assert_logits_close(logits: np.ndarray, expected: np.ndarray) -> None:
    assert logits.shape == expected.shape
    assert np.abs(logits - expected).max() <= GEMMA_LOGITS * np.abs(expected).max()


def test_greedy_tokens_and_logits_match_transformers_for_32_steps(text_models: tuple) -> None:
    reference, model = text_models
    tokens, logits = reference_greedy(reference, 32, input_ids=torch.tensor([PROMPT]))
    assert len(set(tokens)) > 8, "the reference repeats itself: the comparison would not test the cache"
    generated = Gemma3Generator(model, stop_token_ids=()).generate(
        PROMPT, max_new_tokens=32, sampling=GREEDY, return_logits=True
    )
    assert list(generated.tokens) == tokens
    assert not generated.stopped
    assert_logits_close(generated.logits, logits)


def test_a_stop_token_ends_generation_as_eos_does_in_transformers(text_models: tuple) -> None:
    reference, model = text_models
    free, _ = reference_greedy(reference, 32, input_ids=torch.tensor([PROMPT]))
    stop = free[6]
    first = free.index(stop)
    out = reference.generate(torch.tensor([PROMPT]), max_new_tokens=32, do_sample=False, eos_token_id=stop)
    assert out[0, len(PROMPT) :].tolist() == free[: first + 1]
    generated = Gemma3Generator(model, stop_token_ids=(stop, 95)).generate(PROMPT, max_new_tokens=32, sampling=GREEDY)
    assert generated.stopped
    assert list(generated.tokens) == free[:first]


def test_weights_split_over_8_devices_generate_the_same_tokens(text_models: tuple) -> None:
    """Split over the mesh (as on GPUs), and, by default on simulated CPU devices, copied onto the first."""
    reference, model = text_models
    single = Gemma3Generator(model, stop_token_ids=()).generate(PROMPT, max_new_tokens=12, sampling=GREEDY)
    sharded_model = shard_gemma(ours(reference.config.to_dict(), reference.state_dict()), make_mesh(8))
    split = Gemma3Generator(sharded_model, stop_token_ids=(), one_device_on_simulated_cpus=False)
    one = Gemma3Generator(sharded_model, stop_token_ids=())
    assert split.device is None
    assert one.device == jax.devices()[0]
    for generator in (split, one):
        assert generator.generate(PROMPT, max_new_tokens=12, sampling=GREEDY).tokens == single.tokens


def test_sampling_draws_from_the_tempered_top_k_softmax() -> None:
    """Frequencies over 20,000 draws against softmax(logits / T) over the top k, computed in numpy."""
    import jax

    logits = np.array([[2.0, 1.5, 0.2, -1.0, 1.9, 0.0]], np.float32)
    sampling = Sampling(temperature=0.7, top_k=3)
    keys = jax.random.split(jax.random.key(0), 20_000)
    draws = np.asarray(jax.vmap(lambda k: choose(logits, sampling, k)[0])(keys))
    top = np.argsort(-logits[0])[:3]
    expected = np.zeros(6)
    expected[top] = np.exp(logits[0, top] / 0.7) / np.exp(logits[0, top] / 0.7).sum()
    frequencies = np.bincount(draws, minlength=6) / draws.size
    assert set(np.unique(draws)) <= set(top.tolist())
    assert np.abs(frequencies - expected).max() < 0.015  # 4 standard errors at 20,000 draws
    assert int(choose(logits, Sampling(top_k=1), keys[0])[0]) == int(choose(logits, GREEDY, keys[0])[0]) == 0


@pytest.mark.parametrize("value", [0.0, -1.0, float("nan")])
def test_a_temperature_must_be_positive(value: float) -> None:
    with pytest.raises(ValueError, match="temperature must be a positive number"):
        Sampling(temperature=value)


VISION = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
          "patch_size": 8, "image_size": 32, "vision_use_head": False}  # fmt: skip
IMAGE_TOKEN, BOI, EOI = 93, 94, 95


def test_greedy_with_an_image_matches_transformers(text_models: tuple) -> None:
    """The image's features replace its 4 placeholder tokens, which see each other both ways in the prefill."""
    config = Gemma3Config(
        text_config={**TEXT, "eos_token_id": None, "pad_token_id": 0}, vision_config=VISION, mm_tokens_per_image=4,
        image_token_id=IMAGE_TOKEN, boi_token_id=BOI, eoi_token_id=EOI, eos_token_id=None, pad_token_id=0,
    )  # fmt: skip
    reference = randomize(lambda: Gemma3ForConditionalGeneration(config))
    prompt = [2, 5, 17, BOI, *[IMAGE_TOKEN] * 4, EOI, 33, 40, 9]
    pixels = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    token_types = (torch.tensor([prompt]) == IMAGE_TOKEN).long()
    tokens, logits = reference_greedy(
        reference, 32, input_ids=torch.tensor([prompt]), pixel_values=pixels, token_type_ids=token_types,
        attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
    )  # fmt: skip
    tower = Gemma3VisionTower(Gemma3VisionConfig.from_hf_dict(config.to_dict()), rngs=nnx.Rngs(0))
    state = {k: v.numpy() for k, v in reference.state_dict().items()}
    tower = load_gemma_vision_state_dict(tower, state, progress=False)
    text = {k: v for k, v in reference.state_dict().items() if "language_model" in k}
    generator = Gemma3Generator(
        ours(config.to_dict()["text_config"], text), stop_token_ids=(), image_token_id=IMAGE_TOKEN,
        image_features_fn=lambda p: tower(p),
    )  # fmt: skip
    generated = generator.generate(
        prompt, max_new_tokens=32, sampling=GREEDY, pixel_values=pixels.numpy(), return_logits=True
    )
    assert list(generated.tokens) == tokens
    assert_logits_close(generated.logits, logits)
    without_image = generator.generate(prompt, max_new_tokens=4, sampling=GREEDY, pixel_values=np.zeros((1, 3, 32, 32)))
    assert without_image.tokens != tuple(tokens[:4]), "the image's features must change the answer"
