"""Prompt enhancement: Gemma 3 rewrites a prompt into the long, detailed kind LTX-2 follows best.

Source: ltx-core's `text_encoders/gemma/encoders/base_encoder.py` (`GemmaTextEncoder.enhance_t2v`,
`enhance_i2v`, `_enhance`) and ltx-pipelines' `utils/helpers.py` (`generate_enhanced_prompt`,
`clean_response`). As there:
- Messages: the system prompt, then "user prompt: {prompt}" (text-to-video), or the image and
  "User Raw Input Prompt: {prompt}." (image-to-video: the first conditioning image, its long side
  resized to 896 pixels, then to the vision tower's 896 x 896).
- The Gemma directory's own chat template renders them (jinja, as transformers'
  `apply_chat_template` does), with the generation prompt. An image becomes
  "\\n\\n<start_of_image>", `mm_tokens_per_image` image tokens and "<end_of_image>\\n\\n"
  (`Gemma3Processor`).
- The text is tokenized as the processor does: it already starts with `<bos>` and the tokenizer
  adds another; the reference feeds both.
- Up to 512 new tokens, drawn at temperature 0.7 from the 50 most likely, seeded by the
  generation's seed; `<eos>` or `<end_of_turn>` ends them (`eos_token_id` of config.json).
- Decoded without special tokens, then curly quotes, dashes and non-breaking spaces are replaced
  and leading non-letters dropped (`clean_response`).
Not reproduced: torch's random stream (the same seed draws other words here; greedy decoding
matches transformers token for token), and the reference's right padding of the prompt to a
multiple of 8 tokens. transformers' `generate` takes the first token from the last position's
logits, which after that padding is a masked `<pad>` token's (it attends to the prompt from another
position): when the prompt's length is not a multiple of 8 the reference's first token comes from
there, ours from the prompt's last token (the logits the model was trained to continue from). The
later tokens see the pads masked out in both; the pads also shift the sliding-window layers' view
by at most 7 keys once prompt and answer pass 1,024 tokens. With a prompt of a multiple of 8 tokens
the two are the same (tests/test_prompt_enhancer.py runs the reference's own `_enhance`).

The system prompts are the reference's own text files, read from the installed ltx-core package
(`pip install --no-deps ltx-core==1.0.0`: only its text files are read, nothing is imported), or
given as `system_prompts`.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib.util
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from ltx_jax.text_encoders.gemma.encoders.base_encoder import GemmaTextEncoder
from ltx_jax.text_encoders.gemma.encoders.encoder_configurator import gemma_json
from ltx_jax.text_encoders.gemma.encoders.gemma3_generate import REFERENCE_SAMPLING, Gemma3Generator, Sampling
from ltx_jax.text_encoders.gemma.encoders.gemma3_image_processor import (
    Gemma3ImageConfig,
    gemma3_pixel_values,
    read_preprocessor_config,
)
from ltx_jax.text_encoders.gemma.encoders.gemma3_model import Gemma3TextModel
from ltx_jax.text_encoders.gemma.encoders.gemma3_vision import Gemma3VisionTower, create_gemma_vision
from ltx_jax.text_encoders.gemma.tokenizer import LTXGemmaTokenizer, token_text

EnhanceKind = Literal["t2v", "i2v"]
ENHANCE_MAX_NEW_TOKENS = 512
ENHANCE_IMAGE_LONG_SIDE = 896
_SYSTEM_PROMPT_FILES = {"t2v": "gemma_t2v_system_prompt.txt", "i2v": "gemma_i2v_system_prompt.txt"}
_UNICODE_REPLACEMENTS = str.maketrans("\u2018\u2019\u201c\u201d\u2014\u2013\u00a0\u2032\u2212", "''\"\"-- '-")


def reference_system_prompt(kind: EnhanceKind) -> str:
    """ltx-core's system prompt for text-to-video ("t2v") or image-to-video ("i2v") enhancement."""
    spec = importlib.util.find_spec("ltx_core")  # locates the package without importing it (or torch)
    roots = [] if spec is None else list(spec.submodule_search_locations or [])
    for root in roots:
        path = Path(root) / "text_encoders" / "gemma" / "encoders" / "prompts" / _SYSTEM_PROMPT_FILES[kind]
        if path.is_file():
            return path.read_text()
    raise FileNotFoundError(
        f"prompt enhancement uses ltx-core's {_SYSTEM_PROMPT_FILES[kind]}, and ltx-core is not installed here: "
        "`pip install --no-deps ltx-core==1.0.0` (its text files are read; nothing of it is imported). In Python, "
        "PromptEnhancer(..., system_prompts={'t2v': ..., 'i2v': ...}) takes your own instead."
    )


def check_enhancement(gemma_root: str | Path | None, *, with_image: bool) -> None:
    """Raises, reading only small files, if prompt enhancement cannot run: no system prompt, and for
    a Gemma directory (None: the embedded default's) no chat template or stop tokens, or no vision
    tower when an image is to be shown."""
    reference_system_prompt("i2v" if with_image else "t2v")
    if gemma_root is None:
        return
    chat = ChatFormat.from_root(gemma_root)
    if with_image and chat.image_tokens is None:
        raise ValueError(_NO_VISION.format(root=gemma_root))


_NO_VISION = (
    "image-to-video prompt enhancement shows Gemma 3 the first conditioning image, and {root} has no vision tower "
    "(config.json vision_config, boi/eoi/image tokens in tokenizer_config.json): use the multimodal gemma-3-12b-it "
    "directory, or enhance without --image."
)


def clean_response(text: str) -> str:
    """Curly quotes, dashes and odd spaces made plain; leading characters before the first letter dropped."""
    text = text.translate(_UNICODE_REPLACEMENTS)
    first_letter = next((i for i, char in enumerate(text) if char.isalpha()), None)
    return text if first_letter is None else text[first_letter:]


def render_chat(template: str, messages: list[dict[str, Any]], special_tokens: Mapping[str, str]) -> str:
    """`messages` through a jinja chat template with the generation prompt, in the environment
    transformers' `apply_chat_template` renders in (sandboxed, trim_blocks, lstrip_blocks, loop controls)."""
    from jinja2.ext import loopcontrols  # noqa: PLC0415 - needed only to enhance prompts
    from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: PLC0415

    def raise_exception(message: str) -> None:
        raise ValueError(f"the Gemma chat template refused the messages: {message}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.globals["raise_exception"] = raise_exception
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, **special_tokens)


@dataclasses.dataclass(frozen=True)
class ImageTokens:
    """How an image sits in the prompt: `begin`, `count` copies of `token` (their embeddings are
    replaced by the image's features), `end`, as `Gemma3Processor` expands the begin token."""

    begin: str
    token: str
    end: str
    count: int

    def sequence(self) -> str:
        return f"\n\n{self.begin}{self.token * self.count}{self.end}\n\n"


@dataclasses.dataclass(frozen=True)
class ChatFormat:
    """A Gemma directory's chat template, the special tokens it is rendered with and the stop tokens."""

    template: str
    special_tokens: Mapping[str, str]
    stop_token_ids: tuple[int, ...]
    image_tokens: ImageTokens | None = None

    @classmethod
    def from_root(cls, gemma_root: str | Path) -> ChatFormat:
        """From `tokenizer_config.json` (or `chat_template.jinja` beside it) and `config.json`."""
        root = Path(gemma_root)
        tokenizer_config = gemma_json(root, "tokenizer_config.json")
        config = gemma_json(root, "config.json")
        jinja = next(iter(sorted(root.rglob("chat_template.jinja"))), None)
        template = jinja.read_text() if jinja is not None else tokenizer_config.get("chat_template")
        if not isinstance(template, str):
            raise ValueError(
                f"gemma_root {str(root)!r} has no chat template (tokenizer_config.json 'chat_template' or "
                "chat_template.jinja); prompt enhancement renders its messages with it. Use the instruction-tuned "
                "Gemma 3 directory (gemma-3-12b-it)."
            )
        named = {
            k: text
            for k, v in tokenizer_config.items()
            if k.endswith("_token") and isinstance(text := token_text(v), str)
        }
        stops = config.get("eos_token_id", config.get("text_config", {}).get("eos_token_id"))
        if stops is None:
            raise ValueError(f"{root}'s config.json has no eos_token_id; generation would not know where to stop.")
        image_tokens = None
        if "vision_config" in config and {"boi_token", "eoi_token", "image_token"} <= named.keys():
            count = int(config.get("mm_tokens_per_image", 256))
            image_tokens = ImageTokens(named["boi_token"], named["image_token"], named["eoi_token"], count)
        return cls(template, named, tuple(np.atleast_1d(stops).tolist()), image_tokens)


@jax.jit
def _image_features(graphdef: nnx.GraphDef, state: nnx.State, pixel_values: jax.Array) -> jax.Array:
    return nnx.merge(graphdef, state)(pixel_values)


class VisionInputs:
    """Gemma 3's view of an image: `pixel_values(image)` (the processor), then `features(pixels)`
    (the vision tower and projector, built by `load` on first use: 0.4B parameters that text-only
    enhancement never needs)."""

    def __init__(self, load: Callable[[], Gemma3VisionTower], image_config: Gemma3ImageConfig) -> None:
        self._load, self._tower, self.image_config = load, None, image_config

    def pixel_values(self, image: np.ndarray) -> np.ndarray:
        """(H, W, 3) uint8 -> (1, 3, S, S) float32."""
        return gemma3_pixel_values(image, **dataclasses.asdict(self.image_config))

    def features(self, pixel_values: jax.Array) -> jax.Array:
        """(N, 3, S, S) -> (N, image tokens, D)."""
        if self._tower is None:
            self._tower = nnx.split(self._load())
        return _image_features(*self._tower, pixel_values)


class PromptEnhancer:
    """`enhance(prompt, image=None, seed=...)` -> the rewritten prompt; see the module docstring.
    `vision` shows Gemma the image of image-to-video (None: text only)."""

    def __init__(
        self,
        model: Gemma3TextModel,
        tokenizer: LTXGemmaTokenizer,
        chat: ChatFormat,
        *,
        vision: VisionInputs | None = None,
        system_prompts: Mapping[str, str] | None = None,
        max_new_tokens: int = ENHANCE_MAX_NEW_TOKENS,
        sampling: Sampling = REFERENCE_SAMPLING,
    ) -> None:
        self.chat, self.vision, self.max_new_tokens, self.sampling = chat, vision, max_new_tokens, sampling
        self.system_prompts = dict(system_prompts or {})
        self._tokenizer = copy.deepcopy(tokenizer.tokenizer)
        self._tokenizer.no_truncation()  # the system prompt alone is about 1,000 tokens
        image_token_id = None if chat.image_tokens is None else self._tokenizer.token_to_id(chat.image_tokens.token)
        self.generator = Gemma3Generator(
            model,
            stop_token_ids=chat.stop_token_ids,
            image_token_id=image_token_id,
            image_features_fn=None if vision is None else vision.features,
        )

    @classmethod
    def from_root(
        cls,
        gemma_root: str | Path,
        text_encoder: GemmaTextEncoder,
        *,
        mesh: Mesh | None = None,
        param_dtype: jnp.dtype = jnp.bfloat16,
    ) -> PromptEnhancer:
        """On `text_encoder`'s Gemma weights, with the directory's chat template, stop tokens and (for a
        multimodal directory) vision tower, loaded on first use and split over `mesh` like the text model."""
        chat = ChatFormat.from_root(gemma_root)
        vision = None
        if chat.image_tokens is not None:
            load = functools.partial(create_gemma_vision, gemma_root, param_dtype=param_dtype, mesh=mesh)
            vision = VisionInputs(load, read_preprocessor_config(gemma_root))
        return cls(text_encoder.model, text_encoder.tokenizer, chat, vision=vision)

    @property
    def sees_images(self) -> bool:
        return self.chat.image_tokens is not None and self.vision is not None

    def system_prompt(self, kind: EnhanceKind) -> str:
        return self.system_prompts.get(kind) or reference_system_prompt(kind)

    def prompt_ids(self, prompt: str, image: bool) -> list[int]:
        """The token ids Gemma continues: the rendered chat, the image's tokens in place of its marker."""
        if image:
            user = [{"type": "image"}, {"type": "text", "text": f"User Raw Input Prompt: {prompt}."}]
            messages = [{"role": "system", "content": self.system_prompt("i2v")}, {"role": "user", "content": user}]
        else:
            messages = [
                {"role": "system", "content": self.system_prompt("t2v")},
                {"role": "user", "content": f"user prompt: {prompt}"},
            ]
        text = render_chat(self.chat.template, messages, self.chat.special_tokens)
        if image:
            text = text.replace(self.chat.image_tokens.begin, self.chat.image_tokens.sequence())
        return self._tokenizer.encode(text).ids

    def enhance(self, prompt: str, *, image: np.ndarray | None = None, seed: int = 42) -> str:
        """`prompt` rewritten by Gemma (with `image` (H, W, 3) uint8 shown to it, where given)."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError(f"prompt must be non-empty text to enhance, got {prompt!r}.")
        if image is not None and not self.sees_images:
            raise ValueError(_NO_VISION.format(root="this Gemma directory"))
        pixels = None if image is None else self.vision.pixel_values(image)
        generated = self.generator.generate(
            self.prompt_ids(prompt, image is not None),
            max_new_tokens=self.max_new_tokens,
            sampling=self.sampling,
            seed=seed,
            pixel_values=pixels,
        )
        return clean_response(self._tokenizer.decode(list(generated.tokens), skip_special_tokens=True))
