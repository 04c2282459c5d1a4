"""The models of a generation built from official checkpoint files.

Source: `ltx_pipelines/utils/model_ledger.py` (which file holds which model). Unlike the reference,
which builds each model again for every video, everything is built once and kept; the two-stage
flow's stage-2 DiT is the stage-1 DiT with the distilled LoRA applied as it runs (`with_lora`),
not a second copy of the weights.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from ltx_jax.config import LTXConfig
from ltx_jax.convert.checkpoint import converted_manifest, load_checkpoint
from ltx_jax.convert.dit_tensors import Lora, check_lora_matches, checkpoint_config, parse_dtype, parse_model_version
from ltx_jax.convert.lora import load_lora
from ltx_jax.convert.safetensors_file import LazyTensor, SafetensorsFile, parse_metadata_json
from ltx_jax.convert.state_dict import load_state_dict
from ltx_jax.model import audio_vae, upsampler, video_vae
from ltx_jax.model.abstract import abstract_module
from ltx_jax.model.lora import LoraWeights, combined, with_lora
from ltx_jax.model.model import LTXModel
from ltx_jax.model.quantization import Quantization, check_quantization
from ltx_jax.pipeline import flows
from ltx_jax.pipeline.components import (
    PipelineModels,
    Upsampling,
    audio_encoder_callable,
    conditioning_encoders,
    decoder_modules,
    geometry,
)
from ltx_jax.pipeline.decoders import decoder_callables
from ltx_jax.pipeline.defaults import GenerationDefaults, model_defaults
from ltx_jax.pipeline.duration import load_duration_predictor
from ltx_jax.pipeline.flows import Flow, ModelVersion
from ltx_jax.pipeline.model_paths import SPLIT_FILES, check_split_files, checkpoint_tensors, split_tensors
from ltx_jax.pipeline.requests import Components

PathLike = str | os.PathLike


@dataclasses.dataclass(frozen=True)
class CheckpointFiles:
    """What to load, and how.

    The models come from one checkpoint (`checkpoint_path`) or from per-component files (`transformer_path`,
    `video_vae_path` and `audio_vae_path` together, as LTX-2.5 ships them; `model_paths.py`).

    Attributes:
        checkpoint_path: an official LTX-2 `.safetensors` (DiT, text connectors, VAEs, vocoder), or a
            directory `convert_checkpoint` wrote (the DiT in Orbax; the rest from `components_path`).
        transformer_path, video_vae_path, audio_vae_path: the split files: the DiT with its text connectors,
            the video VAE, the audio VAE with its vocoder.
        gemma_root: the Gemma directory (weights + tokenizer) that encodes text prompts; None: the
            caller passes `PromptEmbeddings`.
        text_encoder_path: instead of `gemma_root`, a text encoder packed in one `.safetensors` (LTX-2.5's
            Gemma 4 file, with its tokenizer and the feature extractor's projections).
        prompt_enhancer_gemma_root: a Gemma 3 directory that enhances prompts (`enhance_prompt`) where the text
            encoder cannot generate text (LTX-2.5's Gemma 4); None: the text encoder's own Gemma 3.
        spatial_upsampler_path: the 2x latent upsampler `.safetensors` (the two-stage flows).
        duration_head_path: LTX-2.5's duration head `.safetensors`: with it, a generation without num_frames
            takes the frame count it predicts from the prompt (`GenerationSettings.auto_duration`).
        distilled_lora: the LoRA applied to the stage-2 DiT of the two-stage flows (its strength; for
            two-stage-hq the two strengths below instead, as the reference ignores it there).
        distilled_lora_strength_stage_1, distilled_lora_strength_stage_2: two-stage-hq's strengths
            of the distilled LoRA in each stage (the reference's defaults 0.25 and 0.5).
        loras: LoRAs fused into every DiT; for ic-lora the IC-LoRA(s), applied as stage 1 runs only; for dubit
            the Dub-It IC-LoRA, applied as both stages run.
        prompt_cache_dir: cache prompt contexts here (keyed by prompt and weights).
        dtype: parameter dtype of the DiT and the VAEs: "bfloat16", "float32" or "float16".
        shard_weights: split the DiT's weights over the mesh (FSDP) instead of a copy per device.
        components_path: with a converted `checkpoint_path`: the official `.safetensors` the text
            connectors, VAEs and vocoder come from (None: the file it was converted from, beside it).
        video_decode_tiling: the video decoder's tiles (`video_vae.TileSizeConfig`, frames and pixels with their
            overlaps). None: the convolutional decoder's default (768 px overlapping by 64, 80 frames by 24), and
            for LTX-2.5's diffusion decoder (a CausalDiffusionVAE `video_vae_path`) the sizes ltx-pipelines'
            AUTO_TILING picks from free device memory (`decoders.DiffusionVideoDecoding`).
        quantization: "fp8-cast": the DiT blocks' linear weights in float8_e4m3fn, upcast in the
            matmuls (half their memory; `ltx_jax.model.quantization`), as ltx-pipelines'
            `--quantization fp8-cast`. "fp8": fp8 matmuls on Hopper in blocks 1-42 (ltx-core's
            `fp8-scaled-mm` layer choice; per-tensor scales, the inputs' computed per call), and
            those blocks' video self-attention in fp8 (`ltx_jax.model.fp8_attention`).
    """

    checkpoint_path: PathLike | None = None
    gemma_root: PathLike | None = None
    spatial_upsampler_path: PathLike | None = None
    distilled_lora: Lora | None = None
    loras: tuple[Lora, ...] = ()
    distilled_lora_strength_stage_1: float = 0.25
    distilled_lora_strength_stage_2: float = 0.5
    prompt_cache_dir: PathLike | None = None
    dtype: str = "bfloat16"
    shard_weights: bool = False
    quantization: Quantization = "none"
    components_path: PathLike | None = None
    transformer_path: PathLike | None = None
    video_vae_path: PathLike | None = None
    audio_vae_path: PathLike | None = None
    text_encoder_path: PathLike | None = None
    duration_head_path: PathLike | None = None
    prompt_enhancer_gemma_root: PathLike | None = None
    video_decode_tiling: video_vae.TileSizeConfig | None = None

    def check(self, flow: str | Flow) -> None:
        """Raises `ValueError`/`FileNotFoundError` naming the argument and the fix; reads file headers only."""
        flow = flows.get(flow)
        self._check_layout(flow)
        if Path(self.dit_path()).is_dir():
            self._check_converted(flow)
        elif not self.is_split():
            _check_file("checkpoint_path", self.checkpoint_path, ".safetensors")
            if self.components_path is not None:
                raise ValueError(
                    f"components_path (--components-path) {os.fspath(self.components_path)!r} goes with a converted "
                    "checkpoint_path directory; a .safetensors checkpoint holds its components itself: drop it."
                )
        parse_dtype(self.dtype)
        check_quantization(self.quantization)
        self._check_text_encoder()
        if flow.audio_only:  # 1.2.0's t2a command has no such flags
            video_only = {
                "spatial_upsampler_path (--spatial-upsampler-path)": self.spatial_upsampler_path,
                "video_decode_tiling (--video-decode-tiling)": self.video_decode_tiling,
            }
            if given := [name for name, value in video_only.items() if value is not None]:
                raise ValueError(f"{', '.join(given)}: the {flow.name} flow makes no video; drop them.")
        if flow.needs.upsampler and self.spatial_upsampler_path is None:
            raise ValueError(
                f"The {flow.name} flow needs spatial_upsampler_path (the 2x latent upsampler .safetensors)."
            )
        if self.spatial_upsampler_path is not None:
            _check_file("spatial_upsampler_path", self.spatial_upsampler_path, ".safetensors")
        if self.duration_head_path is not None:
            _check_file("duration_head_path (--duration-head-path)", self.duration_head_path, ".safetensors")
        uses_lora = flow.needs.distilled_lora is not None
        if uses_lora and self.distilled_lora is None:
            raise ValueError(f"The {flow.name} flow needs distilled_lora=Lora(PATH, STRENGTH) for its second stage.")
        if not uses_lora and self.distilled_lora is not None:
            users = [name for name in flows.names() if flows.get(name).needs.distilled_lora]
            raise ValueError(
                f"distilled_lora applies to the second stage of the {' and '.join(users)} flows; the {flow.name} "
                "flow does not use it. Drop it (the distilled flow runs the distilled checkpoint itself)."
            )
        for stage in (1, 2):
            strength = getattr(self, f"distilled_lora_strength_stage_{stage}")
            if not isinstance(strength, (int, float)) or not math.isfinite(strength):
                raise ValueError(f"distilled_lora_strength_stage_{stage} must be a finite number, got {strength!r}.")
        named = [("distilled_lora", self.distilled_lora)] if self.distilled_lora else []
        checkpoint = SafetensorsFile(self.components())
        for name, lora in [*named, *(("loras", lora) for lora in self.loras)]:
            _check_file(name, lora.path, ".safetensors")
            if not math.isfinite(lora.strength):
                raise ValueError(f"{name}: the strength of {lora.path} must be a finite number, got {lora.strength}.")
            check_lora_matches(checkpoint, lora)
        if flow.needs.ic_lora:
            reference_downscale_factor(self.loras)  # the IC-LoRAs' factors agree
        if flow.needs.audio_input == "reference" and len(self.loras) != 1:  # as 1.2.0's dubit command
            raise ValueError(
                f"The {flow.name} flow needs exactly one LoRA, the Dub-It IC-LoRA (loras, --lora PATH [STRENGTH]); "
                f"got {len(self.loras)}."
            )
        self._check_decode_tiling()

    def _check_decode_tiling(self) -> None:
        tiling = self.video_decode_tiling
        if tiling is None:
            return
        if not isinstance(tiling, video_vae.TileSizeConfig):
            raise TypeError(f"video_decode_tiling must be a video_vae.TileSizeConfig or None, got {tiling!r}.")
        vae_file = self.video_vae_path if self.is_split() else self.components()
        metadata = SafetensorsFile(vae_file).metadata
        config = parse_metadata_json(metadata, "config") if "config" in metadata else {}
        try:
            if video_vae.is_diffusion_vae(config):
                geometry = video_vae.TileGeometry.of(video_vae.diffusion_decoder_config(config))
                video_vae.check_tiling(tiling, geometry, "video_decode_tiling")
            else:  # LTX-2's conv decoder: 8 x 32 x 32 pixels per latent cell (it checks again as it decodes)
                for axis, factor in zip(("frames", "height", "width"), (8, 32, 32), strict=True):
                    getattr(tiling, axis).check(factor, f"video_decode_tiling.{axis}")
        except ValueError as error:
            raise ValueError(f"{error} (--video-decode-tiling on the command line)") from None

    def _check_layout(self, flow: Flow) -> None:
        """One checkpoint, or the split files together (an audio-only flow needs no video VAE); never both."""
        split = {name: getattr(self, name) for name in SPLIT_FILES}
        if (self.checkpoint_path is None) == (self.transformer_path is None):
            raise ValueError(
                "give checkpoint_path (--checkpoint-path: one LTX checkpoint) or transformer_path (--transformer-path, "
                "with --video-vae-path and --audio-vae-path: the per-component files), "
                + ("not both." if self.checkpoint_path is not None else "to load models from files.")
            )
        if self.is_split():
            check_split_files(split, optional=("video_vae_path",) if flow.audio_only else ())
            if self.components_path is not None:
                raise ValueError("components_path (--components-path) goes with a converted checkpoint_path: drop it.")
        elif given := [SPLIT_FILES[name][1] for name, path in split.items() if path is not None]:
            raise ValueError(
                f"{', '.join(given)} go with --transformer-path (split files); --checkpoint-path holds its VAEs itself."
            )

    def _check_text_encoder(self) -> None:
        if self.gemma_root is not None and self.text_encoder_path is not None:
            raise ValueError(
                "gemma_root (--gemma-root) and text_encoder_path (--text-encoder-path) both name a text encoder: "
                "keep one (a Gemma directory, or the packed text-encoder file)."
            )
        if self.gemma_root is not None and not Path(self.gemma_root).is_dir():
            raise FileNotFoundError(f"gemma_root={os.fspath(self.gemma_root)!r} is not a directory (Gemma weights).")
        if self.text_encoder_path is not None:
            _check_file("text_encoder_path", self.text_encoder_path, ".safetensors")
        root = self.prompt_enhancer_gemma_root
        if root is not None and not Path(root).is_dir():
            raise FileNotFoundError(
                f"prompt_enhancer_gemma_root (--prompt-enhancer-gemma-root) {os.fspath(root)!r} is not a directory "
                "(a Gemma 3 model directory, e.g. gemma-3-12b-it)."
            )

    def _check_converted(self, flow: Flow) -> None:
        manifest = converted_manifest(self.dit_path())  # a directory convert_checkpoint wrote
        components, directory = self.components(), os.fspath(self.dit_path())
        if self.components_path is None and not components.is_file():
            raise FileNotFoundError(
                f"{directory} holds the DiT only, and {manifest['source']!r}, the file it was converted from, is "
                "not beside it: pass components_path (--components-path FILE), the official .safetensors with its "
                "VAEs, vocoder and text connectors."
            )
        _check_file("components_path", components, ".safetensors")
        cfg, version = checkpoint_config(SafetensorsFile(components), None)
        if version != manifest.get("model_version") or cfg.num_layers != manifest["config"]["num_layers"]:
            raise ValueError(
                f"components_path {os.fspath(components)!r} is LTX {version} with {cfg.num_layers} blocks, but "
                f"{directory} was converted from LTX {manifest.get('model_version')} with "
                f"{manifest['config']['num_layers']}: pass the file it was converted from ({manifest['source']!r})."
            )
        if self.loras and not flow.needs.ic_lora:  # an IC-LoRA applies as stage 1 runs; the others fuse at load
            raise ValueError(
                f"loras (--lora) fuse into the weights as a .safetensors loads; {directory} is "
                "converted: fuse them when converting (scripts/convert_checkpoint.py --lora), or load the file."
            )

    def dit_path(self) -> Path:
        """The DiT's file or converted directory: `checkpoint_path`, or `transformer_path` for split files."""
        return Path(self.checkpoint_path if self.transformer_path is None else self.transformer_path)

    def is_split(self) -> bool:
        return self.transformer_path is not None

    def text_encoder(self) -> Path | None:
        """`gemma_root` or `text_encoder_path`, whichever is given."""
        path = self.gemma_root if self.text_encoder_path is None else self.text_encoder_path
        return None if path is None else Path(path)

    def components(self) -> Path:
        """The `.safetensors` the text connectors load from (and, in one checkpoint, the VAEs and vocoder)."""
        if not self.dit_path().is_dir():
            return self.dit_path()
        if self.components_path is not None:
            return Path(self.components_path)
        return self.dit_path().parent / converted_manifest(self.dit_path())["source"]

    def component_tensors(self) -> tuple[dict[str, LazyTensor], dict[str, Any]]:
        """Every component's tensors (read on use) and `config`, from the checkpoint or the split files' union."""
        if self.is_split():
            return split_tensors({name: getattr(self, name) for name in SPLIT_FILES})
        return checkpoint_tensors(self.components())

    def dit_config(self) -> LTXConfig:
        """The DiT's config from the checkpoint's header (or a converted directory's manifest)."""
        return _header(self.dit_path())[0]

    def model_version(self) -> ModelVersion:
        """ "2.5" (LTX-2.4 and later), "2.3" or "2", from the DiT's header (or a converted directory's manifest)."""
        return _header(self.dit_path())[1]

    def defaults(self, flow: str | Flow) -> GenerationDefaults:
        """The reference's defaults for this checkpoint's model version and `flow`; the images' CRF follows the
        video VAE's file where it is its own (1.2.0's `ImageConditioner` reads it from there)."""
        defaults = flows.get(flow).defaults(self.model_version())
        if self.video_vae_path is None:
            return defaults
        vae_defaults = model_defaults(_version_name(_model_version_text(self.video_vae_path), None))
        return dataclasses.replace(defaults, image_crf=vae_defaults.image_crf)


def _check_file(name: str, path: PathLike, suffix: str) -> None:
    if not str(path).endswith(suffix) or not Path(path).is_file():
        raise FileNotFoundError(f"{name}={os.fspath(path)!r} must be an existing {suffix} file.")


def _header(path: PathLike) -> tuple[LTXConfig, ModelVersion]:
    """The DiT's config and model version (`_version_name`)."""
    if Path(path).is_dir():
        manifest = converted_manifest(path)
        cfg, version = LTXConfig(**manifest["config"]), manifest.get("model_version")
    else:
        cfg, version = checkpoint_config(SafetensorsFile(path), None)
    return cfg, _version_name(version, cfg)


def _version_name(version: str | None, cfg: LTXConfig | None) -> ModelVersion:
    """Whose defaults a file gets, as 1.2.0's `detect_params`: "2.5" from `model_version` 2.4 on, "2.3" from 2.3
    (or, with no version, the DiT's architecture: gated attention is new in 2.3), else "2"."""
    parsed = parse_model_version((version or "").replace("-", "."))
    if parsed >= (2, 4):
        return "2.5"
    return "2.3" if parsed >= (2, 3) or (not parsed and cfg is not None and cfg.apply_gated_attention) else "2"


def dit_model_version(path: PathLike) -> tuple[int, ...]:
    """The DiT file's (or converted directory's) `model_version`, parsed as ltx-pipelines' `detect_model_version`
    does ("2.5.0" -> (2, 5, 0), "2.4-rc2" -> (2, 4)); () where it has none."""
    return parse_model_version((_model_version_text(path) or "").replace("-", "."))


def _model_version_text(path: PathLike) -> str | None:
    if Path(path).is_dir():
        return converted_manifest(path).get("model_version")
    return SafetensorsFile(path).metadata.get("model_version")


def reference_downscale_factor(loras: tuple[Lora, ...]) -> int:
    """The IC-LoRAs' `reference_downscale_factor` (their files' metadata; 1 if absent), which must agree."""
    factors = {
        lora.path: int(SafetensorsFile(lora.path).metadata.get("reference_downscale_factor", 1)) for lora in loras
    }
    distinct = set(factors.values()) - {1}
    if len(distinct) > 1:
        raise ValueError(
            f"The LoRAs' reference_downscale_factor values differ ({factors}); IC-LoRAs trained at different "
            "reference scales cannot be combined."
        )
    return distinct.pop() if distinct else 1


def _with_loras(model: nnx.Module, loras: tuple[Lora, ...], mesh: Mesh) -> nnx.Module:
    """`model` with `loras` applied as it runs (`combined`), sharing its weights; no LoRA: `model` itself."""
    return with_lora(model, combined([load_lora(model, lora, mesh=mesh) for lora in loras])) if loras else model


def load_models(files: CheckpointFiles, flow: str | Flow, mesh: Mesh) -> PipelineModels:
    """Every model `flow` needs, from `files` (checked with `files.check(flow)` first), the DiTs on `mesh`."""
    flow = flows.get(flow)
    files.check(flow)
    tensors, config = files.component_tensors()
    dtype = jnp.dtype(files.dtype)
    load = functools.partial(
        load_checkpoint, files.dit_path(), mesh=mesh, dtype=dtype, shard_weights=files.shard_weights,
        quantization=files.quantization, model_type=flow.dit_config(files.dit_config()).model_type,
    )  # fmt: skip
    # Its LoRAs (the IC-LoRA) run on the stage-1 weights only; the stage-2 weights are the plain DiT (ic-lora's
    # stage 2; dubit runs the stage-1 weights in both stages).
    ic_lora = flow.needs.ic_lora
    with ThreadPoolExecutor(1, thread_name_prefix="ltx-jax-lora") as beside:
        distilled = None
        if flow.needs.distilled_lora:  # read while the DiT loads (its bar shows the time): 2,688 small factors
            distilled = beside.submit(_distilled_lora, files, dtype, mesh)
        model, _ = load(loras=() if ic_lora else files.loras)
    stage_1, stage_2 = model, None
    if ic_lora:
        stage_1, stage_2 = _with_loras(model, files.loras, mesh), model
    if distilled is not None:  # the base weights shared, the distilled LoRA added block by block in stage 2
        lora = distilled.result()
        if flow.needs.distilled_lora == "both_stages":  # at their own strengths, one copy of the factors
            stage_1 = with_lora(model, dataclasses.replace(lora, strength=files.distilled_lora_strength_stage_1))
            lora = dataclasses.replace(lora, strength=files.distilled_lora_strength_stage_2)
        stage_2 = with_lora(model, lora)
    video_decoder, audio_decoder, vocoder = decoder_modules(config, tensors, 0, dtype, video=not flow.audio_only)
    tiling = files.video_decode_tiling
    decode_video, decode_audio = decoder_callables(video_decoder, audio_decoder, vocoder, mesh, tiling)
    upsample, video_encoder = None, functools.partial(_video_encoder, config, tensors, dtype)
    if files.spatial_upsampler_path is not None:
        upsample = Upsampling(_upsampler(files.spatial_upsampler_path, dtype), video_decoder)
    components = Components(
        transformer=stage_1,
        geometry=geometry(config),
        dtype=dtype,
        stage_2_transformer=stage_2,
        upsample=upsample,
        reference_downscale_factor=reference_downscale_factor(files.loras) if ic_lora else 1,
        encode_audio=audio_encoder_callable(functools.partial(_audio_encoder, config, tensors, dtype), dtype)
        if flow.needs.audio_encoder
        else None,
        **({} if flow.audio_only else conditioning_encoders(video_encoder, dtype)),
    )
    prompt_encoder = None if files.text_encoder() is None else _gemma_prompt_encoder(files, config, tensors, mesh)
    version = files.model_version()
    return PipelineModels(
        components=components,
        decode_video=decode_video,
        decode_audio=decode_audio,
        prompt_encoder=prompt_encoder,
        defaults=flow.defaults(version),
        description=f"{os.fspath(files.dit_path())} (LTX-{version}, {dtype.name})",
        model_version=dit_model_version(files.dit_path()),
        duration=None if files.duration_head_path is None else load_duration_predictor(files.duration_head_path, dtype),
    )


def _distilled_lora(files: CheckpointFiles, dtype: jnp.dtype, mesh: Mesh) -> LoraWeights:
    """The distilled LoRA's factors for the DiT's shapes, without a bar (it loads beside the DiT, whose
    bar shows the time); the DiT's abstract model is built here too, off the loading's main thread."""
    return load_lora(LTXModel.abstract(files.dit_config(), dtype), files.distilled_lora, mesh=mesh, progress=False)


def load_prompt_encoder(files: CheckpointFiles, mesh: Mesh) -> Any:  # noqa: ANN401 - a PromptEncoder
    """Gemma from `files.text_encoder()` and the checkpoint's embeddings processor, alone (no DiT)."""
    tensors, config = checkpoint_tensors(files.components())
    return _gemma_prompt_encoder(files, config, tensors, mesh)


def _video_encoder(config: dict[str, Any], tensors: dict[str, Any], dtype: jnp.dtype) -> nnx.Module:
    encoder = abstract_module(lambda rngs: video_vae.video_encoder_from_config(config, rngs=rngs, param_dtype=dtype))
    load_state_dict(encoder, video_vae.vae_encoder_state_dict(tensors), prefix="")
    return encoder


def _audio_encoder(config: dict[str, Any], tensors: dict[str, Any], dtype: jnp.dtype) -> nnx.Module:
    encoder = abstract_module(lambda rngs: audio_vae.audio_encoder_from_config(config, rngs=rngs, param_dtype=dtype))
    load_state_dict(encoder, audio_vae.audio_encoder_state_dict(tensors), prefix="")
    return encoder


def _upsampler(path: PathLike, dtype: jnp.dtype) -> nnx.Module:
    tensors, config = checkpoint_tensors(path)
    model = abstract_module(
        lambda rngs: upsampler.LatentUpsamplerConfigurator.from_config(config, rngs=rngs, param_dtype=dtype)
    )
    load_state_dict(model, tensors, prefix="")
    return model


def _gemma_prompt_encoder(files: CheckpointFiles, config: dict[str, Any], tensors: dict[str, Any], mesh: Mesh) -> Any:  # noqa: ANN401 - a PromptEncoder, imported only with gemma_root
    """Gemma from `files.text_encoder()` (weights split over the mesh) + the checkpoint's embeddings processor,
    checked to belong to the checkpoint's transformer."""
    from ltx_jax.text_encoders.gemma import build_prompt_encoder  # noqa: PLC0415 - only with a text encoder

    return build_prompt_encoder(
        files.text_encoder(),
        config,
        tensors,
        processor_dtype=jnp.dtype(files.dtype),  # as the reference's ModelLedger builds it
        mesh=mesh if mesh.size > 1 else None,
        # Cache hits are per process: with several processes one could skip a Gemma forward whose weights
        # span all of them and hang the others, so the cache is used only in single-process runs.
        cache_dir=files.prompt_cache_dir if jax.process_count() == 1 else None,
        ltx_checkpoint_path=files.components(),
        ltx_metadata=SafetensorsFile(files.components()).metadata,
        enhancer_root=files.prompt_enhancer_gemma_root,
    )
