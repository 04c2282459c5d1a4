"""Prompts -> the contexts the DiT reads: text through Gemma and the checkpoint's embeddings processor,
or `PromptEmbeddings` checked against the model.

`TextEncoder` loads the text path alone, so that a run can encode its prompts and free Gemma before
the DiT is loaded, the order ltx-pipelines uses: the device then holds the larger of the two, not
both (Gemma 3 12B is 24 GB, the LTX-2.3 DiT 38 GB).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from jax.sharding import Mesh

from ltx_jax.config import LTXConfig
from ltx_jax.parallel import make_mesh
from ltx_jax.pipeline import flows
from ltx_jax.pipeline.components import encode_texts
from ltx_jax.pipeline.defaults import GenerationDefaults
from ltx_jax.pipeline.flows import Flow
from ltx_jax.pipeline.images import read_image, resize_and_center_crop
from ltx_jax.pipeline.model_ledger import CheckpointFiles, load_prompt_encoder
from ltx_jax.pipeline.settings import GenerationSettings
from ltx_jax.pipeline.stages import Guidance, PromptEmbeddings
from ltx_jax.text_encoders.gemma.prompt_enhancer import ENHANCE_IMAGE_LONG_SIDE

Contexts = tuple[PromptEmbeddings, PromptEmbeddings | None]


def prompt_contexts(
    encoder: Any,  # noqa: ANN401 - a PromptEncoder, or None when none is loaded
    prompt: str | PromptEmbeddings,
    negative_prompt: str | PromptEmbeddings | None,
    *,
    guidance: Guidance,
    flow: str | Flow,
    defaults: GenerationDefaults,
    cfg: LTXConfig,
) -> Contexts:
    """The contexts of `prompt` and, where `guidance` contrasts with it, of the negative prompt (None:
    `defaults.negative_prompt`). Text is encoded by `encoder`; embeddings are checked against `cfg`."""
    needs_negative = flows.get(flow).guided and guidance.needs_negative_prompt()
    if isinstance(prompt, PromptEmbeddings):
        check_embeddings(cfg, "prompt", prompt)
        if needs_negative and not isinstance(negative_prompt, PromptEmbeddings):
            raise ValueError(
                "A cfg scale != 1 contrasts with the negative prompt: with prompt embeddings, pass "
                "negative_prompt=PromptEmbeddings(...) too, or set both cfg scales to 1."
            )
        if needs_negative:
            check_embeddings(cfg, "negative_prompt", negative_prompt)
        return prompt, negative_prompt if needs_negative else None
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"prompt must be a non-empty string or PromptEmbeddings, got {prompt!r}.")
    if encoder is None:
        raise ValueError(
            "This pipeline has no text encoder (none was loaded, or release_text_encoder() dropped it): load it "
            "with gemma_root=GEMMA_DIR (a Gemma directory) or text_encoder_path=FILE, or pass "
            "prompt=PromptEmbeddings(video, audio) (and negative_prompt for guidance), e.g. from pipe.encode(...) or "
            "TextEncoder.encode(...)."
        )
    if not needs_negative:
        return _for_model(cfg, encode_texts(encoder, [prompt])[0]), None
    negative = defaults.negative_prompt if negative_prompt is None else negative_prompt
    if not isinstance(negative, str):
        raise TypeError(f"negative_prompt must be text like the prompt, got {type(negative).__name__}.")
    positive, negative_embeddings = encode_texts(encoder, [prompt, negative])
    return _for_model(cfg, positive), _for_model(cfg, negative_embeddings)


def _for_model(cfg: LTXConfig, embeddings: PromptEmbeddings) -> PromptEmbeddings:
    """The contexts of the modalities the model of `cfg` has (an audio-only DiT: the audio context alone, as 1.2.0's
    t2a takes `audio_encoding` only)."""
    return PromptEmbeddings(embeddings.video if cfg.has_video else None, embeddings.audio if cfg.has_audio else None)


def enhanced_prompt(encoder: Any, prompt: str | PromptEmbeddings, settings: GenerationSettings) -> str:  # noqa: ANN401
    """`prompt` rewritten by the encoder's Gemma 3 (ltx-pipelines' `generate_enhanced_prompt`), shown
    the first conditioning image of `settings` where there is one, seeded by `settings.seed`."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(
            "enhance_prompt (--enhance-prompt) rewrites text: prompt must be non-empty text, got "
            f"{type(prompt).__name__} (PromptEmbeddings are already encoded; enhance the text before encoding it)."
        )
    if encoder is None:
        raise ValueError(
            "enhance_prompt (--enhance-prompt) needs Gemma 3: this pipeline has no text encoder (none was loaded, or "
            "release_text_encoder() dropped it); load it with gemma_root=GEMMA_DIR."
        )
    image = enhancement_image(settings.images[0].image) if settings.images else None
    return encoder.enhancer().enhance(prompt, image=image, seed=settings.seed)


def enhancement_image(path: str | os.PathLike) -> np.ndarray:
    """The image as ltx-pipelines shows it to Gemma: RGB, its long side resized to 896 pixels
    (bilinear), rounded to uint8 (torch's uint8 resize differs by 1 in some pixels)."""
    image = read_image(path)
    scale = ENHANCE_IMAGE_LONG_SIDE / max(image.shape[:2])
    height, width = int(image.shape[0] * scale), int(image.shape[1] * scale)
    return np.round(resize_and_center_crop(image, height, width)).clip(0, 255).astype(np.uint8)


def check_embeddings(cfg: LTXConfig, name: str, embeddings: PromptEmbeddings) -> None:
    """Each context the model of `cfg` needs, `(1, S, D)` at its context width; None for an absent modality."""
    for modality, present, width in (
        ("video", cfg.has_video, cfg.caption_channels or cfg.cross_attention_dim),
        ("audio", cfg.has_audio, cfg.caption_channels or cfg.audio_cross_attention_dim),
    ):
        context = getattr(embeddings, modality)
        if not present:
            if context is not None:
                raise ValueError(f"{name}.{modality}: this is a model_type={cfg.model_type!r} model; pass None.")
            continue
        shape = None if context is None else np.shape(context)
        if shape is None or len(shape) != 3 or shape[0] != 1 or shape[2] != width:
            raise ValueError(f"{name}.{modality} must be a (1, S, {width}) context array, got shape {shape}.")


class TextEncoder:
    """Gemma 3 and the checkpoint's embeddings processor, without the DiT: encode prompts, drop this
    object (its weights are freed), then build `LTXPipeline.from_files(...)` without `gemma_root` and
    pass it the contexts.

        text = TextEncoder.from_files(files, flow="two-stage", mesh=mesh)
        contexts = [text.encode(prompt, settings) for prompt in prompts]
        del text
    """

    def __init__(self, encoder: Any, *, flow: str | Flow, defaults: GenerationDefaults, cfg: LTXConfig) -> None:  # noqa: ANN401
        self.encoder, self.flow, self.defaults, self.cfg = encoder, flows.get(flow), defaults, cfg

    @classmethod
    def from_files(cls, files: CheckpointFiles, *, flow: str | Flow, mesh: Mesh | None = None) -> TextEncoder:
        """The text path of `files` (which must name `gemma_root` or `text_encoder_path`), its weights split over
        `mesh`."""
        flow = flows.get(flow)
        files.check(flow)
        if files.text_encoder() is None:
            raise ValueError(
                "TextEncoder.from_files needs files.gemma_root (a Gemma directory) or files.text_encoder_path (a "
                "packed text-encoder file)."
            )
        mesh = make_mesh(1) if mesh is None else mesh
        encoder = load_prompt_encoder(files, mesh)
        return cls(encoder, flow=flow, defaults=files.defaults(flow), cfg=flow.dit_config(files.dit_config()))

    def encode(
        self,
        prompt: str,
        settings: GenerationSettings | None = None,
        *,
        negative_prompt: str | None = None,
    ) -> Contexts:
        """What `LTXPipeline.generate(prompt, settings, negative_prompt=...)` would encode first (for a
        prompt already enhanced: `settings.enhance_prompt` is not applied here; see `enhance`)."""
        settings = (settings or GenerationSettings()).resolve(self.defaults, self.flow)
        return prompt_contexts(
            self.encoder, prompt, negative_prompt,
            guidance=settings.guidance, flow=self.flow, defaults=self.defaults, cfg=self.cfg,
        )  # fmt: skip

    def enhance(self, prompt: str, settings: GenerationSettings | None = None) -> str:
        """`prompt` rewritten by Gemma 3, as `LTXPipeline.generate` does with `enhance_prompt=True`."""
        settings = (settings or GenerationSettings()).resolve(self.defaults, self.flow)
        return enhanced_prompt(self.encoder, prompt, settings)
