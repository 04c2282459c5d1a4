"""What a generation uses for each argument left out, per model version.

Source: the reference's per model version (`ltx_pipelines/utils/constants.py`: `LTX_2_PARAMS`,
`LTX_2_3_PARAMS`, `LTX_2_3_HQ_PARAMS`, `DEFAULT_NEGATIVE_PROMPT`; `utils/args.py`: 512x768 one stage),
and the embedded tiny model's. Each flow adapts them (`Flow.defaults`: the two-stage flows at twice
the size, HQ its own).
"""

from __future__ import annotations

import dataclasses

from ltx_jax.pipeline.guiders import MultiModalGuiderParams
from ltx_jax.pipeline.images import DEFAULT_IMAGE_CRF, LTX_2_4_IMAGE_CRF
from ltx_jax.pipeline.stages import Guidance

DEFAULT_NEGATIVE_PROMPT = (  # 1.2.0's, for every model version (1.0.0's began at "blurry")
    "has_subtitles, has_blurbox, transition from black, transition to black, speech_ending_short, "
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
    image_crf: int = DEFAULT_IMAGE_CRF


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
# LTX-2.4 and 2.5 continue 2.3's (`LTX_2_4_PARAMS`): only the conditioning images' CRF moves.
_LTX_2_5 = dataclasses.replace(_LTX_2_3, image_crf=LTX_2_4_IMAGE_CRF)
# The HQ flow's (the reference's HQ parser uses them whatever the checkpoint): 15 res_2s steps, no STG.
HQ_DEFAULTS = dataclasses.replace(
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


def model_defaults(version: str) -> GenerationDefaults:
    """The reference's defaults for an LTX-2 ("2"), LTX-2.3 ("2.3") or LTX-2.4/2.5 ("2.5") model, or the embedded
    model's."""
    table = {"2": _LTX_2, "2.3": _LTX_2_3, "2.5": _LTX_2_5, "embedded": EMBEDDED_DEFAULTS}
    if version not in table:
        raise ValueError(f"The model version must be one of {list(table)}, got {version!r}.")
    return table[version]
