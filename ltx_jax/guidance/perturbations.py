"""Attention perturbations for STG and modality guidance: skip an attention per block and sample.

Source: `ltx_core/guidance/perturbations.py`. Same names and meaning; the classes are frozen and
hashable (tuples, not lists) because they are static arguments of a jitted forward: which blocks
skip an attention decides what the compiled program computes.
"""

from __future__ import annotations

import dataclasses
import enum

import numpy as np


class PerturbationType(enum.Enum):
    """Which attention a perturbation skips."""

    SKIP_A2V_CROSS_ATTN = "skip_a2v_cross_attn"
    SKIP_V2A_CROSS_ATTN = "skip_v2a_cross_attn"
    SKIP_VIDEO_SELF_ATTN = "skip_video_self_attn"
    SKIP_AUDIO_SELF_ATTN = "skip_audio_self_attn"


@dataclasses.dataclass(frozen=True)
class Perturbation:
    """Skip `type` in `blocks` (None: every block)."""

    type: PerturbationType
    blocks: tuple[int, ...] | None

    def __post_init__(self) -> None:
        if self.blocks is not None:
            object.__setattr__(self, "blocks", tuple(self.blocks))

    def is_perturbed(self, perturbation_type: PerturbationType, block: int) -> bool:
        return self.type == perturbation_type and (self.blocks is None or block in self.blocks)


@dataclasses.dataclass(frozen=True)
class PerturbationConfig:
    """The perturbations of one batch element."""

    perturbations: tuple[Perturbation, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "perturbations", tuple(self.perturbations or ()))

    def is_perturbed(self, perturbation_type: PerturbationType, block: int) -> bool:
        return any(p.is_perturbed(perturbation_type, block) for p in self.perturbations)

    @staticmethod
    def empty() -> PerturbationConfig:
        return PerturbationConfig()


@dataclasses.dataclass(frozen=True)
class BatchedPerturbationConfig:
    """One `PerturbationConfig` per batch element."""

    perturbations: tuple[PerturbationConfig, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "perturbations", tuple(self.perturbations))

    def __len__(self) -> int:
        return len(self.perturbations)

    def mask(self, perturbation_type: PerturbationType, block: int) -> np.ndarray:
        """`(B,)` float32 keep-mask: 0 where the sample skips this attention in this block."""
        return np.array(
            [0.0 if p.is_perturbed(perturbation_type, block) else 1.0 for p in self.perturbations], np.float32
        )

    def any_in_batch(self, perturbation_type: PerturbationType, block: int) -> bool:
        return any(p.is_perturbed(perturbation_type, block) for p in self.perturbations)

    def all_in_batch(self, perturbation_type: PerturbationType, block: int) -> bool:
        return all(p.is_perturbed(perturbation_type, block) for p in self.perturbations)

    def at_block(self, block: int) -> BlockPerturbations:
        """What block `block` skips, per sample (all a block needs to know, independent of its index)."""
        skips = tuple(
            (perturbation_type, skipping)
            for perturbation_type in PerturbationType
            if any(skipping := tuple(p.is_perturbed(perturbation_type, block) for p in self.perturbations))
        )
        return BlockPerturbations(len(self.perturbations), skips)

    @staticmethod
    def empty(batch_size: int) -> BatchedPerturbationConfig:
        return BatchedPerturbationConfig(tuple(PerturbationConfig.empty() for _ in range(batch_size)))


@dataclasses.dataclass(frozen=True)
class BlockPerturbations:
    """The perturbations of a batch at one block: for each attention some sample skips there, which
    samples skip it. Blocks that skip the same things get equal (hashable) values, so a compiled block
    program is shared by all of them.
    """

    batch_size: int
    skips: tuple[tuple[PerturbationType, tuple[bool, ...]], ...] = ()

    def skipping(self, perturbation_type: PerturbationType) -> tuple[bool, ...]:
        return dict(self.skips).get(perturbation_type, (False,) * self.batch_size)

    def mask(self, perturbation_type: PerturbationType) -> np.ndarray:
        """`(B,)` float32 keep-mask: 0 where the sample skips this attention."""
        return np.array([0.0 if skip else 1.0 for skip in self.skipping(perturbation_type)], np.float32)

    def any_in_batch(self, perturbation_type: PerturbationType) -> bool:
        return any(self.skipping(perturbation_type))

    def all_in_batch(self, perturbation_type: PerturbationType) -> bool:
        return all(self.skipping(perturbation_type))
