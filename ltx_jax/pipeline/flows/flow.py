"""What a flow is: the models it needs, its defaults, its checks and its plan.

A flow is data. `Flow` says what it needs loaded (`Needs`), what it takes from the caller, its
defaults per model version, and, for one request, its `Plan`: the denoising stages as frozen
records (`Stage`: size, sigmas, sampler, guidance, weights, initial latents, conditionings).
`ltx_jax.pipeline.pipelines.run` executes a plan; the loaders, the compile-ahead, the decoders'
shapes and the command line read the same object. Adding a flow is one module that builds a
`Flow` and registers it (`ltx_jax.pipeline.flows.register`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal

from ltx_jax.config import LTXConfig
from ltx_jax.pipeline.defaults import EMBEDDED_DEFAULTS, GenerationDefaults, model_defaults
from ltx_jax.pipeline.guiders import MultiModalGuiderParams
from ltx_jax.pipeline.stages import Guidance, Sampler

ModelVersion = Literal["2", "2.3", "2.5", "embedded"]
# An audio-only flow's height and width (1.2.0's t2a `_AUDIO_ONLY_PLACEHOLDER_RES`): the audio latent's shape reads
# only the frames and the frame rate.
AUDIO_ONLY_SIZE = 512
InitialVideo = Literal["noise", "upsampled", "source"]
InitialAudio = Literal["noise", "previous", "input", "source"]
AudioReference = Literal["input", "previous"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class Stage:
    """One denoising pass of a plan.

    Attributes:
        description: the progress bar's label ("stage 1", "denoising").
        downscale: the stage runs at the request's height and width divided by this.
        sigmas: the noise levels, first to last (0).
        guidance: the guidance of this pass (`Guidance()`: the conditional pass only).
        sampler: "euler", "euler_ancestral", "res2s" or "gradient_estimation" (Euler with gradient
            estimation, ltx-pipelines' `gradient_estimating_euler_denoising_loop`, gamma 2).
        weights: "stage_1" runs `Components.transformer`, "stage_2" `Components.stage_2_transformer`
            (the DiT with the distilled LoRA; the plain DiT where that is None).
        initial_video: "noise"; "upsampled", the previous stage's video through the x2 upsampler;
            "source", the request's source video encoded (retake).
        initial_audio: "noise"; "previous", the previous stage's audio; "input", the request's
            audio encoded and cut to the video (a2vid); "source", retake's source audio fitted to it.
        noise_scale: how much noise the initial latents get (stage 2 starts at its first sigma).
        images: where conditioning images go: "first_frame" replaces the first latent frame with
            frame 0's and appends the others as keyframes; "keyframes" appends every image.
        references: IC-LoRA's reference videos are appended as tokens (encoded at this stage's size).
        audio_reference: an audio latent appended as tokens kept as given, placed before the generated audio
            in time (`conditioning.condition_by_audio_reference`, Dub-It's): "input", the request's audio
            encoded whole; "previous", the previous stage's audio latent; None: none.
        fixed_audio: the audio latent stays as given (never noised, denoise mask 0, seen at sigma 0),
            unguided, its unconditional pass seeing the prompt's audio context (a2vid).
        frozen_video, frozen_audio: the stream is noised, then frozen: denoise mask 0 and seen at
            sigma 0, so that it drifts back to its initial latent (retake's kept stream, as 1.2.0 does).
        regenerate_span: only the request's retake span is generated again, the rest kept.
        noise_stream: the seed's key is folded with this (0: the key itself).
        timing: the phase its wall seconds are added to (None: not timed apart).
    """

    description: str
    downscale: int
    sigmas: tuple[float, ...]
    guidance: Guidance = Guidance()
    sampler: Sampler = "euler"
    weights: Literal["stage_1", "stage_2"] = "stage_1"
    initial_video: InitialVideo = "noise"
    initial_audio: InitialAudio = "noise"
    noise_scale: float = 1.0
    images: Literal["first_frame", "keyframes"] = "first_frame"
    references: bool = False
    audio_reference: AudioReference | None = None
    fixed_audio: bool = False
    frozen_video: bool = False
    frozen_audio: bool = False
    regenerate_span: bool = False
    noise_stream: int = 0
    timing: str | None = None


@dataclasses.dataclass(frozen=True)
class Plan:
    """A request's stages, in order; the last one's video latent is decoded, and the audio latent of
    stage `audio_from` (an index into `stages`: two-stage and HQ ship stage 1's audio)."""

    stages: tuple[Stage, ...]
    audio_from: int = -1

    @property
    def decoded_downscale(self) -> int:
        return self.stages[-1].downscale


@dataclasses.dataclass(frozen=True, kw_only=True)
class Needs:
    """What a flow needs loaded beside the DiT, and what it takes from the caller.

    Attributes:
        upsampler: the x2 spatial latent upsampler.
        distilled_lora: "stage_2": the distilled LoRA on stage 2's DiT; "both_stages": on both, at
            their own strengths (two-stage-hq); None: not used (refused when given).
        ic_lora: the LoRAs run in stage 1 only (the IC-LoRA) with reference videos, whose
            downscale factor comes from the LoRA files.
        audio_input: "required": the caller's audio file is encoded (a2vid); "from_source": the
            source video's audio track, where it has one (retake); "reference": the one reference video's
            audio track, which it must have, and the generation takes that video's frames (8k+1, rounded
            down) and frame rate (dubit); None: the flow makes its audio.
        source_video: the caller's source video and span (retake): the size, frames and frame rate
            are the source's.
    """

    upsampler: bool = False
    distilled_lora: Literal["stage_2", "both_stages"] | None = None
    ic_lora: bool = False
    audio_input: Literal["required", "from_source", "reference"] | None = None
    source_video: bool = False

    @property
    def audio_encoder(self) -> bool:
        return self.audio_input is not None


def same_defaults(defaults: GenerationDefaults) -> GenerationDefaults:
    return defaults


def audio_only_guidance(guidance: Guidance) -> Guidance:
    """`guidance` for an audio-only flow: its audio part with modality scale 1 (with no video stream the
    modality-isolated pass equals the conditional one, so 1.2.0's t2a command passes 1), and no video guidance."""
    return Guidance(MultiModalGuiderParams(), dataclasses.replace(guidance.audio, modality_scale=1.0))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Flow:
    """One generation flow, as ltx-pipelines' module `source` runs it.

    Attributes:
        name: what the command line and `LTXPipeline(flow=...)` call it.
        source: the ltx-pipelines module it follows.
        summary: one line for `--help`.
        plan: `(request, geometry) -> Plan`: the stages for a `Request`, given the VAEs' latent geometry
            (not typed as such: the request module checks requests against flows).
        needs: the models and inputs beyond the DiT (`Needs`).
        guided: False: fixed distilled sigmas without guidance (no steps, guidance or negative prompt).
        size_multiple: height and width are multiples of this (64 where stage 1 runs at half size).
        audio_output: "decoded" from the final audio latent, or the caller's "input" audio itself.
        reference_defaults: the model version's defaults made this flow's (e.g. twice the size).
        takes_images: whether conditioning images are accepted.
        auto_duration: whether the duration head may choose the frame count (`GenerationSettings.auto_duration`;
            the default where num_frames is left out and the model has a head), as the reference's pipeline does.
        audio_only: the flow makes audio and no video (t2a): the DiT is built audio-only from the file's
            audio-video weights (`dit_config`; its video weights are never read), no video VAE is loaded, the
            prompt has no video context, and the output is an audio file; the frames and frame rate only set
            the audio's duration.
    """

    name: str
    source: str
    summary: str
    plan: Callable[..., Plan]
    needs: Needs = Needs()
    guided: bool = True
    size_multiple: int = 64
    audio_output: Literal["decoded", "input"] = "decoded"
    reference_defaults: Callable[[GenerationDefaults], GenerationDefaults] = same_defaults
    takes_images: bool = True
    auto_duration: bool = False
    audio_only: bool = False

    def dit_config(self, cfg: LTXConfig) -> LTXConfig:
        """The DiT this flow runs, of a file's `cfg`: its audio stream alone for an audio-only flow (1.2.0's
        `LTXAudioOnlyModelConfigurator`), else `cfg` itself."""
        return dataclasses.replace(cfg, model_type="audio") if self.audio_only else cfg

    def defaults(self, version: ModelVersion) -> GenerationDefaults:
        """What a generation with a `version` model uses for each argument left out; the embedded tiny
        model has its own small defaults whatever the flow."""
        if version == "embedded":
            return EMBEDDED_DEFAULTS
        return self.reference_defaults(model_defaults(version))
