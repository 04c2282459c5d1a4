"""Prompt enhancement against ltx-core's `GemmaTextEncoder.enhance_t2v` / `enhance_i2v` and ltx-pipelines'
`generate_enhanced_prompt` (the reference's own code, with transformers' `Gemma3Processor` on the embedded
tokenizer): the same token ids into Gemma, the same pixel values, the same text out of the same answer;
then `--enhance-prompt` end to end on the embedded default on 8 simulated devices, and its errors.
Gemma's generation itself is compared with transformers in test_gemma_generate.py."""

import contextlib
import json
import pathlib

import av
import numpy as np
import pytest
import torch
from flax import nnx
from PIL import Image
from torchaudio_stand_in import torchaudio_stand_in
from transformers import (
    AutoTokenizer,
    Gemma3Config,
    Gemma3ForConditionalGeneration,
    Gemma3ImageProcessorPil,
    Gemma3Processor,
)

from ltx_jax.pipeline import GenerationSettings, ImageCondition
from ltx_jax.pipeline.defaults import EMBEDDED_DEFAULTS
from ltx_jax.pipeline.embedded import (
    EMBEDDED_CHAT,
    EMBEDDED_CONFIG,
    GEMMA3_CHAT_TEMPLATE,
    byte_tokenizer,
    embedded_prompt_encoder,
)
from ltx_jax.pipeline.prompts import enhanced_prompt
from ltx_jax.text_encoders.gemma.encoders import (
    Gemma3ModelConfig,
    Gemma3TextModel,
    Gemma3VisionConfig,
    Gemma3VisionTower,
    load_gemma_state_dict,
    load_gemma_vision_state_dict,
)
from ltx_jax.text_encoders.gemma.encoders.gemma3_generate import GREEDY, Generated
from ltx_jax.text_encoders.gemma.encoders.gemma3_image_processor import Gemma3ImageConfig
from ltx_jax.text_encoders.gemma.prompt_enhancer import (
    ChatFormat,
    PromptEnhancer,
    VisionInputs,
    check_enhancement,
    clean_response,
)

with torchaudio_stand_in():
    from ltx_core.text_encoders.gemma.encoders.base_encoder import GemmaTextEncoder as ReferenceEncoder
    from ltx_pipelines.utils import helpers as reference_helpers

ROOT = pathlib.Path(__file__).parents[1]
from ltx_jax.cli import generate  # noqa: E402 - the command: its parser, without running it

NAMED = {
    "bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>",
    "boi_token": "<start_of_image>", "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>",
}  # fmt: skip
# The embedded Gemma's sizes (ltx_jax.pipeline.embedded), as transformers configures them.
TINY_TEXT = {
    "vocab_size": 272, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 4, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 8, "query_pre_attn_scalar": 8, "sliding_window": 16,
    "sliding_window_pattern": 4, "rope_scaling": {"rope_type": "linear", "factor": 8.0},
}  # fmt: skip
TINY_VISION = {"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
               "patch_size": 8, "image_size": 32, "vision_use_head": False}  # fmt: skip
# Curly quotes, dashes, a leading "1. ", a special token inside: what clean_response and the decoder handle.
ANSWER = "\u201c1. Style: cinematic \u2014 a fox\u2019s <start_of_image>tail\u00a0glows \u2013 caf\u00e9.\u201d"


class CapturingModel(torch.nn.Module):
    """Stands in for Gemma in the reference: records what `generate` is given, answers `ANSWER`."""

    device = torch.device("cpu")

    def __init__(self, answer_ids: list[int]) -> None:
        super().__init__()
        self.answer_ids, self.inputs = answer_ids, {}

    def generate(self, **inputs: torch.Tensor) -> torch.Tensor:
        self.inputs = inputs
        return torch.cat([inputs["input_ids"], torch.tensor([self.answer_ids])], dim=1)


@pytest.fixture(scope="module")
def embedded_encoder():  # noqa: ANN201
    return embedded_prompt_encoder(json.loads(json.dumps(EMBEDDED_CONFIG)), 10)


@pytest.fixture
def processor(tmp_path: pathlib.Path) -> Gemma3Processor:
    """A directory holding the embedded tokenizer and chat template, read as ltx-core builds its processor
    (`module_ops_from_gemma_root`), with the image size of the embedded tower."""
    tokenizer = byte_tokenizer().tokenizer
    tokenizer.no_truncation()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    config = {**NAMED, "add_bos_token": True, "add_eos_token": False, "chat_template": GEMMA3_CHAT_TEMPLATE,
              "extra_special_tokens": {k: NAMED[k] for k in ("boi_token", "eoi_token", "image_token")}}  # fmt: skip
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    return Gemma3Processor(
        image_processor=Gemma3ImageProcessorPil(size={"height": 32, "width": 32}),
        tokenizer=AutoTokenizer.from_pretrained(str(tmp_path)),
        image_seq_length=4,
    )


@pytest.fixture
def reference(processor: Gemma3Processor, embedded_encoder) -> ReferenceEncoder:  # noqa: ANN001
    """ltx-core's encoder with a stand-in for Gemma that answers `ANSWER`."""
    answer = embedded_encoder.enhancer()._tokenizer.encode(ANSWER, add_special_tokens=False).ids
    return ReferenceEncoder(model=CapturingModel([*answer, 261]), processor=processor)


def answering(enhancer, answer: str):  # noqa: ANN001, ANN201
    """Replaces Gemma's generation by `answer`'s tokens; returns the prompt ids it is given."""
    seen = {}

    def generate(prompt_ids: list[int], **options: object) -> Generated:
        seen.update(prompt_ids=list(prompt_ids), **options)
        return Generated(tuple(enhancer._tokenizer.encode(answer, add_special_tokens=False).ids), stopped=True)

    enhancer.generator.generate = generate
    return seen


def reference_input_ids(reference: ReferenceEncoder) -> list[int]:
    """What the reference feeds Gemma, without its right padding to a multiple of 8 (masked)."""
    ids, mask = reference.model.inputs["input_ids"][0], reference.model.inputs["attention_mask"][0]
    assert ids.shape[0] % 8 == 0
    assert mask[: int(mask.sum())].all()
    return ids[mask.bool()].tolist()


def test_text_to_video_enhancement_matches_the_reference(reference, embedded_encoder) -> None:  # noqa: ANN001
    enhancer = embedded_encoder.enhancer()
    seen = answering(enhancer, ANSWER)
    with _no_fork_rng():
        expected = reference_helpers.clean_response(reference.enhance_t2v("A red fox in the snow", seed=7))
    assert enhancer.enhance("A red fox in the snow", seed=7) == expected
    assert seen["prompt_ids"] == reference_input_ids(reference)
    assert seen["prompt_ids"][:2] == [2, 2]  # the template's <bos> and the tokenizer's, as the reference feeds them
    assert (seen["seed"], seen["max_new_tokens"]) == (7, reference.model.inputs["max_new_tokens"])
    assert (seen["sampling"].temperature, seen["sampling"].top_k) == (reference.model.inputs["temperature"], 50)


def test_image_to_video_enhancement_matches_the_reference(tmp_path, reference, embedded_encoder) -> None:  # noqa: ANN001
    """Through ltx-pipelines' `generate_enhanced_prompt` (the image read, its long side resized to 896)."""
    image_path = tmp_path / "frame.png"
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (300, 420, 3), dtype=np.uint8)).save(image_path)
    enhancer = embedded_encoder.enhancer()
    seen = answering(enhancer, ANSWER)
    with _no_fork_rng():
        expected = reference_helpers.generate_enhanced_prompt(reference, "A fox", str(image_path), seed=3)
    settings = GenerationSettings(images=(ImageCondition(str(image_path), 0, 1.0),), seed=3)
    ours = enhanced_prompt(embedded_encoder, "A fox", settings.resolve(EMBEDDED_DEFAULTS, "one-stage"))
    assert ours == expected
    assert seen["prompt_ids"] == reference_input_ids(reference)
    assert seen["pixel_values"].shape == tuple(reference.model.inputs["pixel_values"].shape) == (1, 3, 32, 32)
    # one uint8 level is 2/255 after normalisation: torch's uint8 resize to 896 differs by 1 in some pixels
    np.testing.assert_allclose(seen["pixel_values"], reference.model.inputs["pixel_values"].numpy(), atol=2.1 / 255)


@contextlib.contextmanager
def _no_fork_rng():  # noqa: ANN202
    """The reference forks torch's CUDA generator (`fork_rng(devices=[cpu])` asks for CUDA); the stand-in
    model draws nothing."""
    original = torch.random.fork_rng
    torch.random.fork_rng = lambda **_: contextlib.nullcontext()
    try:
        yield
    finally:
        torch.random.fork_rng = original


@pytest.mark.parametrize(
    "text",
    ["\u201cHello\u201d \u2014 world", "  ...42: \u2018ok\u2019", "123 -- 456", "", "\u00a0\u2212caf\u00e9\u2032"],
)
def test_clean_response_matches_the_reference(text: str) -> None:
    assert clean_response(text) == reference_helpers.clean_response(text)


def test_enhance_prompt_end_to_end_on_8_devices(tmp_path, capsys) -> None:  # noqa: ANN001
    """The tiny random Gemma writes noise, through the real path: printed, encoded, stored in the mp4."""
    image_path = tmp_path / "frame.png"
    Image.fromarray(np.full((64, 96, 3), 120, np.uint8)).save(image_path)
    out = tmp_path / "enhanced.mp4"
    args = generate.parse_args(
        ["--mesh", "8", "--enhance-prompt", "--prompt", "a red fox", "--image", str(image_path), "0", "1.0",
         "--num-inference-steps", "2", "--output-path", str(out)]
    )  # fmt: skip
    result = generate.run(args)["videos"][0]["output"]
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("enhanced prompt: ")]
    assert printed == [f"enhanced prompt: {result.enhanced_prompt}"]
    assert result.enhanced_prompt not in ("", "a red fox")
    with av.open(str(out)) as container:
        assert container.metadata["enhanced_prompt"] == result.enhanced_prompt


def test_enhancement_errors_name_the_fix(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    args = generate.parse_args(["--enhance-prompt", "--prompt-embeddings", "e.npz"])
    with pytest.raises(ValueError, match="--enhance-prompt rewrites text prompts"):
        generate.run(args)
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": [1, 106]}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(NAMED))
    with pytest.raises(ValueError, match="has no chat template"):
        ChatFormat.from_root(tmp_path)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({**NAMED, "chat_template": "{{ bos_token }}"}))
    check_enhancement(tmp_path, with_image=False)
    with pytest.raises(ValueError, match="has no vision tower"):
        check_enhancement(tmp_path, with_image=True)
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install --no-deps ltx-core"):
        check_enhancement(None, with_image=False)


class GreedyGemma(torch.nn.Module):
    """A real Gemma 3 whose `generate` decodes greedily (the reference samples), recording the new ids."""

    device = torch.device("cpu")

    def __init__(self, model: Gemma3ForConditionalGeneration) -> None:
        super().__init__()
        self.model, self.new_ids = model, []

    def generate(self, **inputs: object) -> torch.Tensor:
        inputs.update(do_sample=False, temperature=None)
        out = self.model.generate(**inputs)
        self.new_ids = out[0, inputs["input_ids"].shape[1] :].tolist()
        return out


@pytest.mark.parametrize("with_image", [False, True], ids=["t2v", "i2v"])
def test_greedy_enhancement_matches_ltx_core_on_a_real_tiny_gemma(processor, with_image) -> None:  # noqa: ANN001
    """ltx-core's own `enhance_t2v` / `enhance_i2v` on a random tiny `Gemma3ForConditionalGeneration`
    (decoding greedily) and ours on its weights write the same tokens. The user prompt is lengthened to
    a multiple of 8 tokens: the reference pads to one, and draws its first token from a pad otherwise."""
    config = Gemma3Config(
        text_config={**TINY_TEXT, "eos_token_id": [1, 261], "pad_token_id": 0}, vision_config=TINY_VISION,
        mm_tokens_per_image=4, image_token_id=264, boi_token_id=262, eoi_token_id=263, eos_token_id=[1, 261],
        pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Gemma3ForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "embed_tokens" not in name:
                param.add_(0.3 * torch.randn_like(param))
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    text = Gemma3TextModel(Gemma3ModelConfig.from_hf_dict(config.to_dict()), rngs=nnx.Rngs(0))
    load_gemma_state_dict(text, {k: v for k, v in state.items() if "language_model" in k}, progress=False)
    tower = Gemma3VisionTower(Gemma3VisionConfig.from_hf_dict(config.to_dict()), rngs=nnx.Rngs(0))
    load_gemma_vision_state_dict(tower, state, progress=False)
    vision = VisionInputs(lambda: tower, Gemma3ImageConfig(image_size=32))
    ours = PromptEnhancer(text, byte_tokenizer(), EMBEDDED_CHAT, vision=vision, max_new_tokens=24, sampling=GREEDY)
    image = np.random.default_rng(2).integers(0, 256, (40, 56, 3), dtype=np.uint8) if with_image else None
    prompt = "A red fox"
    while len(ours.prompt_ids(prompt, with_image)) % 8:
        prompt += "!"
    greedy = GreedyGemma(model)
    reference = ReferenceEncoder(model=greedy, processor=processor)
    with _no_fork_rng():
        if with_image:
            expected = reference.enhance_i2v(prompt, torch.from_numpy(image), max_new_tokens=24)
        else:
            expected = reference.enhance_t2v(prompt, max_new_tokens=24)
    got = ours.generator.generate(
        ours.prompt_ids(prompt, with_image), max_new_tokens=24, sampling=GREEDY,
        pixel_values=None if image is None else vision.pixel_values(image),
    )  # fmt: skip
    stops = {1, 261}
    assert list(got.tokens) == [t for t in greedy.new_ids if t not in stops][: len(got.tokens)]
    assert len(got.tokens) + got.stopped == len(greedy.new_ids)
    assert len(set(got.tokens)) > 4, "a repeated token would not test much"
    assert ours.enhance(prompt, image=image) == reference_helpers.clean_response(expected)
