"""Denoisers: one sampler step's DiT passes, batched, turned into x0 predictions and guided.

Source: `ltx_pipelines/utils/denoisers.py` (upstream main). Like upstream, every guidance pass of a
step goes into ONE batched forward (batch = passes x B), each sample carrying its own
perturbations; `max_batch_size` splits that batch into sequential chunks when memory is short.
The forward is anything with the DiT's call signature: `LTXModel`, or `SequenceParallel` on a mesh.

Where every token of a modality is generated (its denoise mask is 1 everywhere, as in text-to-video),
each sample passes its sigma as one timestep, `(B, 1, 1)`, rather than one per token: every token's
timestep is that sigma, so the DiT computes its AdaLN modulation once per sample rather than once per
token, and the blocks read one row of it (upstream computes `mask * sigma` per token). A mask with a
conditioned token, or one not on the host (a traced or device array), keeps the per-token timesteps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from ltx_jax.guidance.perturbations import BatchedPerturbationConfig
from ltx_jax.model.modality import Modality
from ltx_jax.model.model import to_denoised
from ltx_jax.pipeline.guiders import MultiModalGuiderParams, combine, guidance_passes
from ltx_jax.pipeline.types import LatentState

Forward = Callable[
    [Modality | None, Modality | None, BatchedPerturbationConfig | None], tuple[jax.Array | None, jax.Array | None]
]


@dataclasses.dataclass
class GuidedDenoiser:
    """Runs the passes the guidance needs and returns the guided x0 of each modality.

    Attributes:
        forward: the DiT (velocity model): `forward(video, audio, perturbations) -> (vx, ax)`.
        video_context, audio_context: `(B, S, D)` prompt embeddings (None for an absent modality).
        video_negative, audio_negative: negative-prompt embeddings, needed when a cfg scale != 1.
        video_params, audio_params: guidance per modality; the defaults run only the `cond` pass.
        max_batch_size: samples per forward call (None: all passes in one call).
    """

    forward: Forward
    video_context: jax.Array | None
    audio_context: jax.Array | None
    video_negative: jax.Array | None = None
    audio_negative: jax.Array | None = None
    video_params: MultiModalGuiderParams = dataclasses.field(default_factory=MultiModalGuiderParams)
    audio_params: MultiModalGuiderParams = dataclasses.field(default_factory=MultiModalGuiderParams)
    max_batch_size: int | None = None
    _last: tuple[jax.Array | None, jax.Array | None] = (None, None)

    def __post_init__(self) -> None:
        self.passes = guidance_passes(self.video_params, self.audio_params)
        if any(name == "uncond" for name, _ in self.passes):
            for name, context, negative in (
                ("video", self.video_context, self.video_negative),
                ("audio", self.audio_context, self.audio_negative),
            ):
                if context is not None and negative is None:
                    raise ValueError(
                        f"{name}_negative is None, but a cfg_scale != 1 needs the negative prompt's embeddings. "
                        "Pass them, or set both cfg scales to 1."
                    )
        if self.max_batch_size is not None and self.max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1 or None, got {self.max_batch_size}.")

    def __call__(
        self, video: LatentState | None, audio: LatentState | None, sigma: float, step: int
    ) -> tuple[jax.Array | None, jax.Array | None]:
        """x0 predictions `(B, T, C)` of video and audio for the states at noise level `sigma`."""
        skip_video = self.video_params.should_skip_step(step)
        skip_audio = self.audio_params.should_skip_step(step)
        if (video is None or skip_video) and (audio is None or skip_audio):
            return self._last
        n = len(self.passes)
        video_in, audio_in, configs = self._forward_inputs(video, audio, sigma, not skip_video, not skip_audio)
        vx, ax = self._batched_forward(video_in, audio_in, configs)
        results = []
        for state, velocity, modality, params, skip, last in (
            (video, vx, video_in, self.video_params, skip_video, self._last[0]),
            (audio, ax, audio_in, self.audio_params, skip_audio, self._last[1]),
        ):
            if state is None:
                results.append(None)
            elif skip:
                results.append(last)
            else:
                results.append(_guided_x0(params, tuple(name for name, _ in self.passes), n, modality, velocity))
        self._last = (results[0], results[1])
        return self._last

    def first_forward_inputs(
        self, video: LatentState | None, audio: LatentState | None, sigma: float
    ) -> tuple[Modality | None, Modality | None, BatchedPerturbationConfig]:
        """What the step at `sigma` passes to `forward` first (its first chunk where `max_batch_size`
        splits the batch): `(video, audio, perturbations)`. Traced under `jax.eval_shape`, the shapes
        a stage's forward is compiled for."""
        video_in, audio_in, configs = self._forward_inputs(video, audio, sigma, True, True)
        chunk = slice(0, min(len(configs), self.max_batch_size or len(configs)))
        take = partial(_slice_modality, part=chunk)
        return take(video_in), take(audio_in), BatchedPerturbationConfig(configs[chunk])

    def _forward_inputs(
        self, video: LatentState | None, audio: LatentState | None, sigma: float, video_on: bool, audio_on: bool
    ) -> tuple[Modality | None, Modality | None, tuple]:
        """Every pass's inputs in one batch, and each sample's perturbation config."""
        batch = (video or audio).latent.shape[0]
        video_in = self._modality(video, self.video_context, self.video_negative, sigma, video_on)
        audio_in = self._modality(audio, self.audio_context, self.audio_negative, sigma, audio_on)
        return video_in, audio_in, tuple(config for _, config in self.passes for _ in range(batch))

    def _modality(
        self, state: LatentState | None, context: jax.Array | None, negative: jax.Array | None, sigma: float, on: bool
    ) -> Modality | None:
        if state is None:
            return None
        contexts = tuple(negative if name == "uncond" else context for name, _ in self.passes)
        per_sample = every_token_generated(state.denoise_mask)
        return _batched_modality(state, contexts, sigma, enabled=on, per_sample=per_sample)

    def _batched_forward(
        self, video: Modality | None, audio: Modality | None, configs: tuple
    ) -> tuple[jax.Array | None, jax.Array | None]:
        total = len(configs)
        chunk = total if self.max_batch_size is None else self.max_batch_size
        if chunk >= total:
            return _local(self.forward(video, audio, BatchedPerturbationConfig(configs)))
        outputs = []
        for start in range(0, total, chunk):
            part = slice(start, min(start + chunk, total))
            take = partial(_slice_modality, part=part)
            outputs.append(_local(self.forward(take(video), take(audio), BatchedPerturbationConfig(configs[part]))))
        return tuple(
            None if parts[0] is None else jnp.concatenate(parts, axis=0) for parts in zip(*outputs, strict=True)
        )


def _local(outputs: tuple[jax.Array | None, ...]) -> tuple[jax.Array | None, ...]:
    """This process's copy of replicated outputs: in a multi-process run the sampler state stays
    process-local (every process computes the same values), so no array spans hosts outside the DiT."""
    return tuple(x if x is None or x.is_fully_addressable else x.addressable_data(0) for x in outputs)


def _slice_modality(modality: Modality | None, part: slice) -> Modality | None:
    if modality is None:
        return None
    return dataclasses.replace(
        modality,
        latent=modality.latent[part],
        sigma=modality.sigma[part],
        timesteps=modality.timesteps[part],
        positions=modality.positions[part],
        context=modality.context[part],
        attention_mask=None if modality.attention_mask is None else modality.attention_mask[part],
        keyframes_mask=None if modality.keyframes_mask is None else modality.keyframes_mask[part],
    )


def every_token_generated(denoise_mask: jax.Array | np.ndarray) -> bool:
    """Whether `denoise_mask` is a host array that is 1 everywhere: then each token's timestep is its
    sample's sigma (see the module docstring)."""
    return isinstance(denoise_mask, np.ndarray) and bool(np.all(denoise_mask == 1))


@partial(jax.jit, static_argnames=("enabled", "per_sample"))
def _batched_modality(
    state: LatentState, contexts: tuple[jax.Array, ...], sigma: float, enabled: bool, per_sample: bool
) -> Modality:
    """The DiT's input for every pass at once: the state repeated once per pass, each pass with its
    own context; timesteps `(B, 1, 1)` with `per_sample` (`every_token_generated`), else `(B, T, 1)`;
    a frozen state at sigma 0.
    One program: op by op, its dozen small programs were each compiled (cold) or read from the cache
    (warm) on the main thread in a stage's first steps (benchmarks/results/2026-12-03/README.md, "Sixth round")."""

    def repeat(x: jax.Array) -> jax.Array:
        return jnp.concatenate([x] * len(contexts), axis=0)

    sigmas = jnp.full((len(contexts) * state.latent.shape[0],), 0.0 if state.frozen else sigma, jnp.float32)
    return Modality(
        latent=repeat(state.latent),
        sigma=sigmas,
        timesteps=sigmas[:, None, None] if per_sample else repeat(state.denoise_mask) * sigmas[:, None, None],
        positions=repeat(state.positions),
        # in the model's dtype, as the reference's embeddings processor hands it over (a float32
        # context would meet bf16 queries in cross-attention)
        context=jnp.concatenate(contexts, axis=0).astype(state.latent.dtype),
        enabled=enabled,
        attention_mask=None if state.attention_mask is None else repeat(state.attention_mask),
        keyframes_mask=None if state.keyframes_mask is None else repeat(state.keyframes_mask),
    )


@partial(jax.jit, static_argnums=(0, 1, 2))
def _guided_x0(
    params: MultiModalGuiderParams, names: tuple[str, ...], n: int, modality: Modality, velocity: jax.Array
) -> jax.Array:
    denoised = to_denoised(modality.latent, velocity, modality.timesteps)
    return combine(params, dict(zip(names, jnp.split(denoised, n, axis=0), strict=True)))
