"""Multi-modal guidance: CFG, STG, modality isolation and rescale, per modality.

Source: `ltx_core/components/guiders.py::MultiModalGuider{Params,}` (upstream main, which combines in
float32) and the pass list of `ltx_pipelines/utils/denoisers.py::_guided_denoise`. A step runs up
to four passes of the DiT: `cond`, `uncond` (negative prompt), `ptb` (self-attention skipped in
`stg_blocks`) and `mod` (audio<->video cross-attention skipped everywhere), then combines them:

    pred = c + (cfg - 1)(c - u) + stg (c - p) + (mod - 1)(c - m),  then  pred *= r std(c)/std(pred) + 1 - r
"""

from __future__ import annotations

import dataclasses
import math
import numbers

import jax
import jax.numpy as jnp

from ltx_jax.guidance.perturbations import Perturbation, PerturbationConfig, PerturbationType

PASSES = ("cond", "uncond", "ptb", "mod")


@dataclasses.dataclass(frozen=True)
class MultiModalGuiderParams:
    """Guidance of one modality. Defaults do no guidance (only the `cond` pass)."""

    cfg_scale: float = 1.0
    stg_scale: float = 0.0
    stg_blocks: tuple[int, ...] = ()
    rescale_scale: float = 0.0
    modality_scale: float = 1.0
    skip_step: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "stg_blocks", tuple(self.stg_blocks or ()))
        for name in ("cfg_scale", "stg_scale", "rescale_scale", "modality_scale"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise ValueError(f"MultiModalGuiderParams.{name} must be a finite number, got {value!r}.")
        if isinstance(self.skip_step, bool) or not isinstance(self.skip_step, numbers.Integral) or self.skip_step < 0:
            raise ValueError(f"MultiModalGuiderParams.skip_step must be an integer >= 0, got {self.skip_step!r}.")

    def do_unconditional_generation(self) -> bool:
        return not math.isclose(self.cfg_scale, 1.0)

    def do_perturbed_generation(self) -> bool:
        return not math.isclose(self.stg_scale, 0.0)

    def do_isolated_modality_generation(self) -> bool:
        return not math.isclose(self.modality_scale, 1.0)

    def should_skip_step(self, step: int) -> bool:
        """With `skip_step = k`, only every (k+1)-th step runs the model; the others reuse its result."""
        return self.skip_step != 0 and step % (self.skip_step + 1) != 0


def guidance_passes(
    video: MultiModalGuiderParams, audio: MultiModalGuiderParams
) -> tuple[tuple[str, PerturbationConfig], ...]:
    """The passes one step needs, in the reference's order, with each pass's perturbations."""
    passes = [("cond", PerturbationConfig.empty())]
    if video.do_unconditional_generation() or audio.do_unconditional_generation():
        passes.append(("uncond", PerturbationConfig.empty()))
    stg = []
    if video.do_perturbed_generation():
        stg.append(Perturbation(PerturbationType.SKIP_VIDEO_SELF_ATTN, video.stg_blocks))
    if audio.do_perturbed_generation():
        stg.append(Perturbation(PerturbationType.SKIP_AUDIO_SELF_ATTN, audio.stg_blocks))
    if stg:
        passes.append(("ptb", PerturbationConfig(tuple(stg))))
    if video.do_isolated_modality_generation() or audio.do_isolated_modality_generation():
        isolate = (
            Perturbation(PerturbationType.SKIP_A2V_CROSS_ATTN, None),
            Perturbation(PerturbationType.SKIP_V2A_CROSS_ATTN, None),
        )
        passes.append(("mod", PerturbationConfig(isolate)))
    return tuple(passes)


def combine(params: MultiModalGuiderParams, outputs: dict[str, jax.Array]) -> jax.Array:
    """`MultiModalGuider.calculate` over the passes' denoised outputs (missing passes count as 0)."""
    f32 = jnp.float32
    cond = outputs["cond"].astype(f32)

    def other(name: str) -> jax.Array | float:
        return outputs[name].astype(f32) if name in outputs else 0.0

    pred = (
        cond
        + (params.cfg_scale - 1) * (cond - other("uncond"))
        + params.stg_scale * (cond - other("ptb"))
        + (params.modality_scale - 1) * (cond - other("mod"))
    )
    if params.rescale_scale != 0:
        factor = jnp.std(cond, ddof=1) / jnp.std(pred, ddof=1)
        pred = pred * (params.rescale_scale * factor + (1 - params.rescale_scale))
    return pred.astype(outputs["cond"].dtype)
