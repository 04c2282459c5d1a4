"""`LTXPipeline`: load the models once, then turn prompts into videos.

    pipe = LTXPipeline.from_checkpoint("ltx-2.3-22b-dev.safetensors", gemma_root="gemma-3-12b-it", mesh=mesh)
    out = pipe("A red fox trots through fresh snow", num_frames=121, seed=10)
    out.save("fox.mp4")

Every argument is checked before anything is loaded or any device work starts; a call with the
shapes of an earlier one compiles nothing new, and the same seed gives the same video on any mesh.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator, Sequence

import jax
import numpy as np
from jax.sharding import Mesh

from ltx_jax.config import LTXConfig
from ltx_jax.convert.dit_tensors import Lora
from ltx_jax.model.quantization import Quantization
from ltx_jax.parallel import SequenceParallel, make_mesh
from ltx_jax.parallel.exchange import ExchangeBackend
from ltx_jax.parallel.strategies import Strategy, check_layout
from ltx_jax.pipeline import flows
from ltx_jax.pipeline.audio_files import audio_channels, read_audio
from ltx_jax.pipeline.components import PipelineModels
from ltx_jax.pipeline.decoders import BackgroundCompiler, compile_after_stage_1
from ltx_jax.pipeline.defaults import GenerationDefaults
from ltx_jax.pipeline.embedded import EMBEDDED_CONFIG, EMBEDDED_WEIGHTS_SEED, embedded_models
from ltx_jax.pipeline.flows import Flow, Plan
from ltx_jax.pipeline.generated_video import GeneratedVideo
from ltx_jax.pipeline.media_io import (
    check_audio_output_path,
    check_output_path,
    enhanced_prompt_metadata,
    write_mp4_chunks,
    write_wav,
)
from ltx_jax.pipeline.model_ledger import CheckpointFiles, load_models
from ltx_jax.pipeline.pipelines import run
from ltx_jax.pipeline.prompts import enhanced_prompt as gemma_enhanced_prompt
from ltx_jax.pipeline.prompts import prompt_contexts
from ltx_jax.pipeline.requests import AudioInput, ImageCondition, Request, RetakeSpan, VideoCondition
from ltx_jax.pipeline.settings import GenerationSettings
from ltx_jax.pipeline.stages import Guidance, PromptEmbeddings
from ltx_jax.pipeline.stops import OnStep, StepWatch, StoppableForward
from ltx_jax.pipeline.timing import ForwardStats, TimedForward, timed_phase
from ltx_jax.pipeline.video_files import load_mask_video

PathLike = str | os.PathLike


@dataclasses.dataclass(frozen=True, kw_only=True)
class RuntimeOptions:
    """How the DiT runs on the mesh.

    Attributes:
        strategy: "ulysses", "allgather_kv", "ring" or "usp" (`SequenceParallel`).
        backend: the head exchange, "all_to_all" or "ffi" (the CUDA peer-to-peer kernel).
        max_batch_size: guidance passes per forward (None: all of a step's passes in one).
    """

    strategy: Strategy = "ulysses"
    backend: ExchangeBackend = "all_to_all"
    max_batch_size: int | None = None

    def check(self, cfg: LTXConfig, mesh: Mesh) -> None:
        """Raises `ValueError` naming the option and the fix, before anything is built."""
        if not isinstance(mesh, Mesh):
            raise TypeError(f"mesh must be a jax.sharding.Mesh (ltx_jax.parallel.make_mesh(n)), got {mesh!r}.")
        mb = self.max_batch_size
        if mb is not None and (isinstance(mb, bool) or not isinstance(mb, int) or mb < 1):
            raise ValueError(f"max_batch_size must be a positive integer or None (all passes at once), got {mb!r}.")
        if self.backend == "ffi" and {d.platform for d in mesh.devices.flat} != {"gpu"}:
            raise ValueError(
                f"backend='ffi' is a CUDA kernel; this mesh is on {sorted({d.platform for d in mesh.devices.flat})}. "
                "Use backend='all_to_all'."
            )
        check_layout(cfg, mesh, self.strategy, self.backend)


class LTXPipeline:
    """The models of one flow, loaded once, on a mesh; calling it generates a video.

    Build it with `LTXPipeline.from_checkpoint(...)` (official files) or `LTXPipeline.embedded(...)`
    (a tiny random-weight model, no download). The DiT runs under `SequenceParallel` on `mesh`.
    """

    def __init__(
        self,
        models: PipelineModels,
        *,
        flow: str | Flow = "one-stage",
        mesh: Mesh | None = None,
        runtime: RuntimeOptions = RuntimeOptions(),
    ) -> None:
        flow = flows.get(flow)
        mesh = make_mesh(1) if mesh is None else mesh
        parts = models.components
        self.config: LTXConfig = parts.transformer.cfg
        runtime.check(self.config, mesh)
        self.flow: Flow = flow
        self.mesh, self.runtime = mesh, runtime
        self.defaults: GenerationDefaults = models.defaults
        self.description = models.description
        self.model_version = models.model_version
        self.duration = models.duration
        self._timed = [
            TimedForward(
                StoppableForward(SequenceParallel(model, mesh, strategy=runtime.strategy, backend=runtime.backend))
            )
            for model in (parts.transformer, parts.stage_2_transformer)
            if model is not None
        ]
        self._components = dataclasses.replace(
            parts, transformer=self._timed[0], stage_2_transformer=self._timed[1] if len(self._timed) > 1 else None
        )
        self._decode_video, self._decode_audio = models.decode_video, models.decode_audio
        self._compiler = BackgroundCompiler()
        self._prompt_encoder = models.prompt_encoder

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint_path: PathLike | None = None,
        *,
        transformer_path: PathLike | None = None,
        video_vae_path: PathLike | None = None,
        audio_vae_path: PathLike | None = None,
        text_encoder_path: PathLike | None = None,
        duration_head_path: PathLike | None = None,
        gemma_root: PathLike | None = None,
        prompt_enhancer_gemma_root: PathLike | None = None,
        spatial_upsampler_path: PathLike | None = None,
        distilled_lora: Lora | PathLike | None = None,
        loras: Sequence[Lora | PathLike] = (),
        flow: str | Flow = "one-stage",
        mesh: Mesh | None = None,
        strategy: Strategy = "ulysses",
        backend: ExchangeBackend = "all_to_all",
        shard_weights: bool = False,
        dtype: str = "bfloat16",
        prompt_cache_dir: PathLike | None = None,
        max_batch_size: int | None = None,
        quantization: Quantization = "none",
        components_path: PathLike | None = None,
    ) -> LTXPipeline:
        """The models of `flow` from official LTX-2 files (one checkpoint, or the split files), or a converted DiT
        directory and the file it came from (see `CheckpointFiles` and `RuntimeOptions`). A LoRA given as a path
        has strength 1."""
        files = CheckpointFiles(
            checkpoint_path,
            transformer_path=transformer_path,
            video_vae_path=video_vae_path,
            audio_vae_path=audio_vae_path,
            text_encoder_path=text_encoder_path,
            duration_head_path=duration_head_path,
            gemma_root=gemma_root,
            prompt_enhancer_gemma_root=prompt_enhancer_gemma_root,
            spatial_upsampler_path=spatial_upsampler_path,
            distilled_lora=None if distilled_lora is None else _as_lora(distilled_lora),
            loras=tuple(_as_lora(lora) for lora in loras),
            prompt_cache_dir=prompt_cache_dir,
            dtype=dtype,
            shard_weights=shard_weights,
            quantization=quantization,
            components_path=components_path,
        )
        return cls.from_files(
            files,
            flow=flow,
            mesh=mesh,
            runtime=RuntimeOptions(strategy=strategy, backend=backend, max_batch_size=max_batch_size),
        )

    @classmethod
    def from_files(
        cls,
        files: CheckpointFiles,
        *,
        flow: str | Flow,
        mesh: Mesh | None = None,
        runtime: RuntimeOptions = RuntimeOptions(),
    ) -> LTXPipeline:
        """`from_checkpoint` with its options as typed values: checks everything from the files' headers,
        then loads."""
        flow = flows.get(flow)
        mesh = make_mesh(1) if mesh is None else mesh
        files.check(flow)
        runtime.check(flow.dit_config(files.dit_config()), mesh)
        return cls(load_models(files, flow, mesh), flow=flow, mesh=mesh, runtime=runtime)

    @classmethod
    def embedded(
        cls,
        *,
        flow: str | Flow = "one-stage",
        mesh: Mesh | None = None,
        strategy: Strategy = "ulysses",
        backend: ExchangeBackend = "all_to_all",
        max_batch_size: int | None = None,
        weights_seed: int = EMBEDDED_WEIGHTS_SEED,
    ) -> LTXPipeline:
        """The embedded tiny model with RANDOM weights (`ltx_jax.pipeline.embedded`): every stage of a
        real generation runs (building it takes about a minute on a 2-core CPU, mostly random
        initialisation; a generation then a few seconds); the output is noise-like."""
        flow = flows.get(flow)
        mesh = make_mesh(1) if mesh is None else mesh
        runtime = RuntimeOptions(strategy=strategy, backend=backend, max_batch_size=max_batch_size)
        runtime.check(LTXConfig.from_metadata(EMBEDDED_CONFIG), mesh)
        return cls(embedded_models(flow, weights_seed), flow=flow, mesh=mesh, runtime=runtime)

    def __call__(
        self,
        prompt: str | PromptEmbeddings,
        *,
        negative_prompt: str | PromptEmbeddings | None = None,
        height: int | None = None,
        width: int | None = None,
        num_frames: int | None = None,
        frame_rate: float | None = None,
        num_inference_steps: int | None = None,
        seed: int | None = None,
        images: Sequence[ImageCondition] = (),
        guidance: Guidance | None = None,
        reference_videos: Sequence[VideoCondition] = (),
        skip_stage_2: bool = False,
        reference_attention_strength: float = 1.0,
        attention_mask_video: str | os.PathLike | None = None,
        audio_path: str | os.PathLike | None = None,
        audio_start_time: float = 0.0,
        audio_max_duration: float | None = None,
        retake: RetakeSpan | None = None,
        enhance_prompt: bool = False,
        auto_duration: tuple[float, float] | None = None,
        output_path: PathLike | None = None,
    ) -> GeneratedVideo:
        """Generates one video; None takes `self.defaults` (see `GenerationSettings` for each argument).

        `prompt` is text (encoded by the pipeline's Gemma) or `PromptEmbeddings`; `negative_prompt`
        likewise (None: the reference's default negative prompt, used where a cfg scale is not 1).
        `output_path`: an mp4 written while the video decodes (see `generate`); a .wav for the t2a flow.
        """
        settings = GenerationSettings(
            height=height, width=width, num_frames=num_frames, frame_rate=frame_rate,
            num_inference_steps=num_inference_steps, seed=seed, images=tuple(images), guidance=guidance,
            reference_videos=tuple(reference_videos), skip_stage_2=skip_stage_2,
            reference_attention_strength=reference_attention_strength, attention_mask_video=attention_mask_video,
            audio_path=audio_path, audio_start_time=audio_start_time, audio_max_duration=audio_max_duration,
            retake=retake, enhance_prompt=enhance_prompt, auto_duration=auto_duration,
        )  # fmt: skip
        return self.generate(prompt, settings, negative_prompt=negative_prompt, output_path=output_path)

    def generate(
        self,
        prompt: str | PromptEmbeddings,
        settings: GenerationSettings | None = None,
        *,
        negative_prompt: str | PromptEmbeddings | None = None,
        output_path: PathLike | None = None,
        enhanced_prompt: str | None = None,
        on_step: OnStep | None = None,
    ) -> GeneratedVideo:
        """`__call__` with the arguments as one `GenerationSettings` (None: every default).

        `enhanced_prompt`: the text of a prompt enhanced ahead (`enhance`, then `encode`), for the
        result and the mp4's metadata; with `settings.enhance_prompt` the pipeline enhances it itself.

        With `output_path`, process 0 also writes the mp4 there (what `GeneratedVideo.save` writes), encoding
        each temporal chunk of frames while the device decodes the next, as ltx-pipelines interleaves them;
        the timings then hold "decoding_and_mp4_writing" (video and audio) instead of the decoding phases. An
        audio-only flow (t2a) returns no frames and writes its audio as a .wav ("wav_writing").

        `on_step(step, steps)` is called before each DiT forward with the denoising step it belongs to (0-based,
        over every stage) and the plan's step count (`StepWatch`). What it raises stops the generation there, as
        a signal does: nothing is decoded or written.
        """
        settings = settings or GenerationSettings()
        settings = settings.with_duration_head(self.flow, self.duration is not None).resolve(self.defaults, self.flow)
        if output_path is not None and jax.process_index() == 0:  # the process that writes it
            (check_audio_output_path if self.flow.audio_only else check_output_path)(output_path, "output_path")
        if settings.enhance_prompt and enhanced_prompt is not None:
            raise ValueError(
                "enhanced_prompt is the text of a prompt enhanced ahead; with enhance_prompt=True the pipeline "
                "enhances the prompt itself: give one or the other."
            )
        timings: dict[str, float] = {}
        peaks: dict[str, int] = {}
        enhanced = enhanced_prompt
        if settings.enhance_prompt:
            with timed_phase(timings, "prompt_enhancement", peaks):
                enhanced = prompt = self.enhance(prompt, settings)
        with timed_phase(timings, "prompt_encoding", peaks):
            positive, negative = self._prompts(prompt, negative_prompt, settings.guidance)
        if settings.auto_duration is not None:
            settings = self._predicted_frames(settings, positive)
        request = self._request(settings, positive, negative)  # from settings `resolve` checked
        plan = self.flow.plan(request, self._components.geometry)
        for forward in self._timed:
            forward.seconds.clear()
            forward.peaks.clear()
        compile_after_stage_1(
            self._compiler, self._components, self._decode_video, self._decode_audio, request, self.flow, plan
        )
        metadata = {} if enhanced is None else enhanced_prompt_metadata(enhanced)
        try:
            latents, video, audio, sample_rate = self._denoise_and_decode(
                request, plan, timings, peaks, (output_path, metadata), on_step
            )
        finally:  # after a stop or an error, what has not started compiling is not needed
            self._compiler.cancel()
        return GeneratedVideo(
            video, audio, settings.frame_rate, sample_rate, *latents, settings, timings, self._forward_stats(), peaks,
            enhanced,
        )  # fmt: skip

    def _predicted_frames(self, settings: GenerationSettings, positive: PromptEmbeddings) -> GenerationSettings:
        """`settings` with the frame count the duration head predicts from the prompt's contexts, checked again."""
        low, high = settings.auto_duration
        frames = self.duration(
            positive.video, positive.audio, frame_rate=settings.frame_rate, min_seconds=low, max_seconds=high
        )
        return dataclasses.replace(settings, num_frames=frames, auto_duration=None).resolve(self.defaults, self.flow)

    def _request(
        self, settings: GenerationSettings, positive: PromptEmbeddings, negative: PromptEmbeddings | None
    ) -> Request:
        return Request(
            prompt=positive,
            height=settings.height,
            width=settings.width,
            num_frames=settings.num_frames,
            frame_rate=settings.frame_rate,
            seed=settings.seed,
            num_inference_steps=settings.num_inference_steps,
            guidance=settings.guidance,
            negative=negative,
            images=settings.images,
            max_batch_size=self.runtime.max_batch_size,
            reference_videos=settings.reference_videos,
            skip_stage_2=settings.skip_stage_2,
            reference_attention_strength=settings.reference_attention_strength,
            reference_attention_mask=None
            if settings.attention_mask_video is None
            else load_mask_video(  # at stage 1's size, as the reference's command line loads it
                settings.attention_mask_video, settings.height // 2, settings.width // 2, settings.num_frames
            ),
            audio=_input_audio(settings, self.flow),
            retake=settings.retake,
            model_version=self.model_version,
        )

    def _denoise_and_decode(
        self,
        request: Request,
        plan: Plan,
        timings: dict[str, float],
        peaks: dict[str, int],
        output: tuple,
        on_step: OnStep | None,
    ) -> tuple[tuple, np.ndarray | None, np.ndarray | None, int]:
        """`((video latent, audio latent), frames, (samples, 2) audio, sample rate)`; only process 0
        decodes (the others computed the same latents, and return None for frames and audio), and writes
        the mp4 where `output` (path, metadata) names one."""
        with timed_phase(timings, "denoising", peaks), self._watching(plan, on_step):
            video_latent, audio_latent = run(self._components, request, plan, stages := {})
        timings.update(stages)  # within denoising
        latents, (path, metadata) = (video_latent, audio_latent), output
        if jax.process_index() != 0:
            return latents, None, None, 0
        if self.flow.audio_only:
            return latents, None, *self._audio_alone(audio_latent, path, timings, peaks)
        if path is not None:
            with timed_phase(timings, "decoding_and_mp4_writing", peaks):
                self._compiler.wait()
                # dispatched: the audio's queue after them
                chunks = self._decode_video.chunks(video_latent, request.seed)
                audio, rate = self._audio_track(request, audio_latent)
                frames, audio = write_mp4_chunks(path, chunks, request.frame_rate, audio, rate, metadata=metadata)
            return latents, frames, None if audio is None else np.ascontiguousarray(audio.T), rate
        with timed_phase(timings, "video_decoding", peaks):
            self._compiler.wait()
            video = self._decode_video(video_latent, request.seed)
        audio, rate = self._audio_track(request, audio_latent)
        if audio is not None and self.flow.audio_output == "decoded":
            with timed_phase(timings, "audio_decoding", peaks):
                audio = np.asarray(audio, np.float32)
        return latents, video, None if audio is None else np.ascontiguousarray(audio.T), rate

    def _audio_alone(
        self, latent: jax.Array, path: PathLike | None, timings: dict[str, float], peaks: dict[str, int]
    ) -> tuple[np.ndarray, int]:
        """An audio-only flow's `(samples, 2)` waveform and its rate, written to `path` as a .wav where given."""
        with timed_phase(timings, "audio_decoding", peaks):
            self._compiler.wait()
            waveform, rate = self._decode_audio(latent)
        if path is not None:
            with timed_phase(timings, "wav_writing", peaks):
                write_wav(path, waveform, rate)
        return np.ascontiguousarray(waveform.T), rate

    @contextlib.contextmanager
    def _watching(self, plan: Plan, on_step: OnStep | None) -> Iterator[None]:
        """Within the block, each DiT forward first tells `on_step` its step (`StepWatch`)."""
        watch = None if on_step is None else StepWatch(plan, on_step)
        for forward in self._timed:
            forward.forward.watch = watch  # the StoppableForward inside
        try:
            yield
        finally:
            for forward in self._timed:
                forward.forward.watch = None

    def _audio_track(self, request: Request, audio_latent: jax.Array | None) -> tuple[object, int]:
        """The `(channels, samples)` waveform (a2vid's input; else decoding, dispatched) and its rate, or (None, 0)."""
        if self.flow.audio_output == "input":  # the input audio itself, as the reference returns it
            return request.audio.waveform, request.audio.sample_rate
        if audio_latent is None:
            return None, 0
        return self._decode_audio.waveform(audio_latent), self._decode_audio.sample_rate

    def encode(
        self,
        prompt: str | PromptEmbeddings,
        settings: GenerationSettings | None = None,
        *,
        negative_prompt: str | PromptEmbeddings | None = None,
    ) -> tuple[PromptEmbeddings, PromptEmbeddings | None]:
        """The contexts a generation with these arguments encodes first: the prompt's and, where its
        guidance contrasts with it, the negative prompt's. Pass them back as `prompt=` and
        `negative_prompt=`; encoding every prompt ahead lets `release_text_encoder()` free Gemma
        (24 GB for the 12B) before any denoising."""
        settings = (settings or GenerationSettings()).resolve(self.defaults, self.flow)
        return self._prompts(prompt, negative_prompt, settings.guidance)

    def enhance(self, prompt: str, settings: GenerationSettings | None = None) -> str:
        """`prompt` rewritten by Gemma 3 as `enhance_prompt=True` does (ltx-pipelines' `--enhance-prompt`):
        shown the first of `settings.images` where there is one, seeded by `settings.seed`."""
        settings = (settings or GenerationSettings()).resolve(self.defaults, self.flow)
        return gemma_enhanced_prompt(self._prompt_encoder, prompt, settings)

    def release_text_encoder(self) -> None:
        """Drops this pipeline's text encoder, so its weights are freed once nothing else holds them;
        text prompts raise from then on (`PromptEmbeddings` still work)."""
        self._prompt_encoder = None

    def _prompts(
        self,
        prompt: str | PromptEmbeddings,
        negative_prompt: str | PromptEmbeddings | None,
        guidance: Guidance,
    ) -> tuple[PromptEmbeddings, PromptEmbeddings | None]:
        """The contexts of the prompt and, where guidance contrasts with it, of the negative prompt."""
        return prompt_contexts(
            self._prompt_encoder, prompt, negative_prompt,
            guidance=guidance, flow=self.flow, defaults=self.defaults, cfg=self.config,
        )  # fmt: skip

    def _forward_stats(self) -> dict[int | None, ForwardStats]:
        stats = {}
        for forward in self._timed:
            for tokens, seconds in forward.seconds.items():
                warm = seconds[1:] or seconds  # the first forward of a shape may have compiled
                stats[tokens] = ForwardStats(len(seconds), float(np.median(warm)), forward.peaks.get(tokens))
        return stats


def _input_audio(settings: GenerationSettings, flow: Flow) -> AudioInput | None:
    """a2vid's audio file, the audio track of dubit's reference video, or that of retake's source video where it
    has one."""
    if flow.needs.audio_input == "reference":
        return AudioInput(*read_audio(settings.reference_videos[0].video))
    if settings.audio_path is not None:
        return AudioInput(*read_audio(settings.audio_path, settings.audio_start_time, settings.audio_max_duration))
    if settings.retake is not None and audio_channels(settings.retake.video):
        return AudioInput(*read_audio(settings.retake.video))
    return None


def _as_lora(lora: Lora | PathLike) -> Lora:
    return lora if isinstance(lora, Lora) else Lora(os.fspath(lora))
