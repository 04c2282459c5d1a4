"""Several prompts, one pipeline: the models loaded once and every prompt encoded before any denoising.

Where Gemma comes from files, it is loaded first, enhances and encodes every prompt, and is freed before
the DiT is loaded: ltx-pipelines' order, so the device holds one of them at a time. The embedded default
encodes with its own tiny Gemma after loading, then releases it. `ltx-jax generate` runs this; so can a
caller with a list of prompts.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from jax.sharding import Mesh

from ltx_jax.interrupts import check_stop
from ltx_jax.pipeline import flows
from ltx_jax.pipeline.ltx_pipeline import LTXPipeline, RuntimeOptions
from ltx_jax.pipeline.model_ledger import CheckpointFiles
from ltx_jax.pipeline.prompts import TextEncoder
from ltx_jax.pipeline.settings import GenerationSettings
from ltx_jax.pipeline.stages import PromptEmbeddings
from ltx_jax.pipeline.timing import device_memory_peak

Prompt = str | PromptEmbeddings
Contexts = tuple[PromptEmbeddings, PromptEmbeddings | None]  # a prompt's and its negative prompt's


@dataclasses.dataclass(frozen=True)
class LoadedBatch:
    """The pipeline, each prompt's contexts, each prompt's enhanced text (None where not enhanced), and the
    seconds and device-memory peaks of loading and encoding."""

    pipeline: LTXPipeline
    contexts: list[Contexts]
    enhanced: list[str | None]
    load_s: float
    encode_s: float
    peaks: dict[str, int | None]


def check_writable(name: str, path: Path) -> None:
    """`path` can be written: not a directory, and its folder exists or can be created, writable (`name`:
    the argument, for the message)."""
    if path.is_dir():
        raise IsADirectoryError(f"{name} {path} is a directory; give the file to write, e.g. {path / 'out'}.")
    folder = path.absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise NotADirectoryError(
            f"{name} {path}: {folder} is a file, so no folder can be made there; choose another path."
        )
    if not os.access(folder, os.W_OK):
        raise PermissionError(f"{name} {path}: {folder} is not writable; choose a path you can write to.")


def load_and_encode(
    files: CheckpointFiles | None,
    prompts: Sequence[Prompt],
    settings: GenerationSettings,
    *,
    flow: str,
    mesh: Mesh,
    runtime: RuntimeOptions,
    negative_prompt: Prompt | None = None,
    on_enhanced: Callable[[str], None] = lambda _: None,
) -> LoadedBatch:
    """Loads the pipeline of `flow` from `files` (None: the embedded default) and encodes every prompt
    (enhanced first where `settings.enhance_prompt`; `on_enhanced` is given each enhanced text), in the
    order above. A stop signal is honoured between prompts."""
    prompts, peaks, contexts, enhanced = list(prompts), {}, None, [None] * len(prompts)
    encode_s, start = 0.0, time.perf_counter()
    texts = isinstance(prompts[0], str)
    if files is not None and files.text_encoder() is not None and texts:
        runtime.check(flows.get(flow).dit_config(files.dit_config()), mesh)  # before any device work, as from_files
        text = TextEncoder.from_files(files, flow=flow, mesh=mesh)
        prompts, enhanced = _enhanced(text, prompts, settings, on_enhanced)
        contexts = [text.encode(prompt, settings, negative_prompt=negative_prompt) for prompt in prompts]
        del text  # Gemma's weights are freed here, before the DiT is loaded
        files = dataclasses.replace(files, gemma_root=None, text_encoder_path=None)
        encode_s, peaks["prompt encoding"] = time.perf_counter() - start, device_memory_peak()
    start = time.perf_counter()
    if files is None:
        pipeline = LTXPipeline.embedded(flow=flow, mesh=mesh, **dataclasses.asdict(runtime))
    else:
        pipeline = LTXPipeline.from_files(files, flow=flow, mesh=mesh, runtime=runtime)
    load_s, peaks["loading"] = time.perf_counter() - start, device_memory_peak()
    if contexts is None:
        start = time.perf_counter()
        if texts:
            prompts, enhanced = _enhanced(pipeline, prompts, settings, on_enhanced)
        contexts = [pipeline.encode(prompt, settings, negative_prompt=negative_prompt) for prompt in prompts]
        pipeline.release_text_encoder()  # every prompt is encoded: Gemma's weights are freed before any denoising
        encode_s, peaks["prompt encoding"] = time.perf_counter() - start, device_memory_peak()
    return LoadedBatch(pipeline, contexts, enhanced, load_s, encode_s, peaks)


def _enhanced(
    encoder: TextEncoder | LTXPipeline, prompts: list[str], settings: GenerationSettings, report: Callable
) -> tuple[list[str], list[str | None]]:
    """The prompts to encode, and per prompt its enhanced text (None without `settings.enhance_prompt`)."""
    if not settings.enhance_prompt:
        return prompts, [None] * len(prompts)
    enhanced = []
    for prompt in prompts:
        enhanced.append(encoder.enhance(prompt, settings))
        report(enhanced[-1])
        check_stop()
    return enhanced, list(enhanced)
