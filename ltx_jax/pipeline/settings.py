"""A generation's arguments besides the prompt, and their defaults, in one place.

Defaults: the reference's per model version and flow (`ltx_pipelines/utils/constants.py`:
`LTX_2_PARAMS`, `LTX_2_3_PARAMS`, `LTX_2_3_HQ_PARAMS`, `DEFAULT_NEGATIVE_PROMPT`; `utils/args.py`: one stage
at 512x768, the two-stage flows at twice that, 1024x1536, HQ 1088x1920), and the embedded tiny model's.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os

from ltx_jax.pipeline.guiders import MultiModalGuiderParams
from ltx_jax.pipeline.images import check_image_readable
from ltx_jax.pipeline.pipelines import (
    UNGUIDED_FLOWS,
    Flow,
    ImageCondition,
    VideoCondition,
    check_flow,
    check_images,
    check_reference_attention,
    check_reference_videos,
    check_sizes,
)
from ltx_jax.pipeline.schedulers import DISTILLED_SIGMA_VALUES
from ltx_jax.pipeline.stages import Guidance

DEFAULT_NEGATIVE_PROMPT = (
    "blurry, out of focus, overexposed, underexposed, low contrast, washed out colors, excessive noise, "
    "grainy texture, poor lighting, flickering, motion blur, distorted proportions, unnatural skin tones, "
    "deformed facial features, asymmetrical face, missing facial features, extra limbs, disfigured hands, "
    "wrong hand count, artifacts around text, inconsistent perspective, camera shake, incorrect depth of "
    "field, background too sharp, background clutter, distracting reflections, harsh shadows, inconsistent "
    "lighting direction, color banding, cartoonish rendering, 3D CGI look, unrealistic materials, uncanny "
    "valley effect, incorrect ethnicity, wrong gender, exaggerated expressions, wrong gaze direction, "
    "mismatched lip sync, silent or muted audio, distorted voice, robotic voice, echo, background noise, "
    "off-sync audio, incorrect dialogue, added dialogue, repetitive speech, jittery movement, awkward "
    "pauses, incorrect timing, unnatural transitions, inconsistent framing, tilted camera, flat lighting, "
    "inconsistent tone, cinematic oversaturation, stylized filters, or AI artifacts."
)


def reference_guidance(stg_block: int) -> Guidance:
    """The reference's CFG + STG + modality guidance, STG on `stg_block` (28 on LTX-2.3, 29 on 2.0)."""
    video = MultiModalGuiderParams(
        cfg_scale=3.0, stg_scale=1.0, stg_blocks=(stg_block,), rescale_scale=0.7, modality_scale=3.0
    )
    return Guidance(video, dataclasses.replace(video, cfg_scale=7.0))


@dataclasses.dataclass(frozen=True)
class GenerationDefaults:
    """What a generation uses for every argument the caller leaves out."""

    height: int
    width: int
    num_frames: int
    frame_rate: float
    num_inference_steps: int
    seed: int
    negative_prompt: str
    guidance: Guidance


_LTX_2 = GenerationDefaults(
    height=512,
    width=768,
    num_frames=121,
    frame_rate=24.0,
    num_inference_steps=40,
    seed=10,
    negative_prompt=DEFAULT_NEGATIVE_PROMPT,
    guidance=reference_guidance(29),
)
_LTX_2_3 = dataclasses.replace(_LTX_2, num_inference_steps=30, guidance=reference_guidance(28))
# The HQ flow's (the reference's HQ parser uses them whatever the checkpoint): 15 res_2s steps, no STG.
_HQ = dataclasses.replace(
    _LTX_2_3,
    height=1088,
    width=1920,
    num_inference_steps=15,
    guidance=Guidance(
        MultiModalGuiderParams(cfg_scale=3.0, stg_scale=0.0, rescale_scale=0.45, modality_scale=3.0),
        MultiModalGuiderParams(cfg_scale=7.0, stg_scale=0.0, rescale_scale=1.0, modality_scale=3.0),
    ),
)
# The embedded tiny model: 2 blocks (STG on the second), small frames, few steps.
EMBEDDED_DEFAULTS = dataclasses.replace(
    _LTX_2_3, height=128, width=192, num_frames=25, num_inference_steps=8, guidance=reference_guidance(1)
)


def checkpoint_defaults(is_ltx_2_3: bool, flow: Flow) -> GenerationDefaults:
    """The reference's defaults for an LTX-2.3 (else 2.0) checkpoint and `flow`: the two-stage flows
    generate at twice the one-stage resolution."""
    defaults = _LTX_2_3 if is_ltx_2_3 else _LTX_2
    if flow == "one-stage":
        return defaults
    if flow == "two-stage-hq":
        return _HQ
    return dataclasses.replace(defaults, height=2 * defaults.height, width=2 * defaults.width)


@dataclasses.dataclass(frozen=True)
class GenerationSettings:
    """One generation's arguments besides the prompt; None takes the pipeline's default.

    Attributes:
        height, width: pixels; multiples of 32 (64 for the two-stage flows).
        num_frames: 8k + 1 frames.
        frame_rate: frames per second (also sets the audio's length).
        num_inference_steps: steps of the (first) stage; the distilled flow's sigmas are fixed.
        seed: the noise (the same seed gives the same video on any mesh).
        images: conditioning images.
        guidance: per-modality guidance (`Guidance(MultiModalGuiderParams(...), ...)`); the distilled
            and ic-lora flows run without.
        reference_videos: the ic-lora flow's reference videos (`VideoCondition(path, strength)`).
        skip_stage_2: the ic-lora flow only: decode stage 1's half-size result.
        reference_attention_strength: ic-lora: how much generated and reference tokens attend to each
            other (1: fully), times `attention_mask_video` (a grayscale video over the reference's
            frames, white = 1) where given.
    """

    height: int | None = None
    width: int | None = None
    num_frames: int | None = None
    frame_rate: float | None = None
    num_inference_steps: int | None = None
    seed: int | None = None
    images: tuple[ImageCondition, ...] = ()
    guidance: Guidance | None = None
    reference_videos: tuple[VideoCondition, ...] = ()
    skip_stage_2: bool = False
    reference_attention_strength: float = 1.0
    attention_mask_video: str | os.PathLike | None = None

    def resolve(self, defaults: GenerationDefaults, flow: Flow) -> GenerationSettings:
        """Every None replaced by its default, checked for `flow`. Raises `ValueError`/`TypeError`
        naming the argument, its value and the fix; reads nothing but the image files' existence."""
        check_flow(flow)
        distilled = flow in UNGUIDED_FLOWS
        for name, value in (("num_inference_steps", self.num_inference_steps), ("guidance", self.guidance)):
            if distilled and value is not None:
                raise ValueError(
                    f"{name}={value!r}: the {flow} flow runs fixed sigmas (8 + 3 steps) without guidance; "
                    "leave it unset, or use the one-stage or two-stage flow."
                )
        resolved = GenerationSettings(
            **{field: _or(getattr(self, field), getattr(defaults, field)) for field in _DEFAULTED},
            images=tuple(self.images),
            guidance=Guidance() if distilled else _or(self.guidance, defaults.guidance),
            reference_videos=tuple(self.reference_videos),
            skip_stage_2=self.skip_stage_2,
            reference_attention_strength=self.reference_attention_strength,
            attention_mask_video=self.attention_mask_video,
        )
        if distilled:
            resolved = dataclasses.replace(resolved, num_inference_steps=len(DISTILLED_SIGMA_VALUES) - 1)
        resolved._check(flow)
        return resolved

    def _check(self, flow: Flow) -> None:
        for name in ("height", "width", "num_frames", "num_inference_steps", "seed"):
            _check_integer(name, getattr(self, name))
        if not isinstance(self.frame_rate, numbers.Real) or not math.isfinite(self.frame_rate):
            raise ValueError(f"frame_rate must be a finite number of frames per second, got {self.frame_rate!r}.")
        check_sizes(self.height, self.width, self.num_frames, self.frame_rate, flow)
        if self.num_inference_steps < 2:
            raise ValueError(f"num_inference_steps={self.num_inference_steps} must be at least 2 (e.g. 30).")
        if not isinstance(self.guidance, Guidance):
            raise TypeError(
                f"guidance must be a Guidance(video=MultiModalGuiderParams(...), audio=...), got {self.guidance!r}."
            )
        check_images(self.images, self.num_frames)
        for image in self.images:
            if not os.path.isfile(image.image):
                raise FileNotFoundError(f"images: the conditioning image {os.fspath(image.image)!r} does not exist.")
            check_image_readable(image.image)
        check_reference_videos(self.reference_videos, self.skip_stage_2, flow)
        check_reference_attention(self.reference_attention_strength, self.attention_mask_video is not None, flow)
        named = [("reference_videos", video.video) for video in self.reference_videos]
        if self.attention_mask_video is not None:
            named.append(("attention_mask_video", self.attention_mask_video))
        for name, path in named:
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{name}: {os.fspath(path)!r} does not exist.")


_DEFAULTED = ("height", "width", "num_frames", "frame_rate", "num_inference_steps", "seed")


def _or(value: object, default: object) -> object:
    return default if value is None else value


def _check_integer(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__}).")
