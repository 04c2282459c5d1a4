"""Attention perturbations for STG and modality guidance: skip an attention per block and sample.

Source: `ltx_core/guidance/perturbations.py`. Same names and meaning; the classes are frozen and
hashable (tuples, not lists) because they are static arguments of a jitted forward: which blocks
skip an attention decides what the compiled program computes.

Block programs (`ltx_jax.parallel.block_programs`) take the keep-masks of attentions that only some
samples skip as inputs instead (`BatchedPerturbationConfig.masked_at_blocks`): STG's one perturbed
block then runs the program of the 47 others, one compilation instead of two.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Protocol

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

    def masked_at_blocks(self, num_blocks: int) -> tuple[tuple[MaskedSkips, np.ndarray], ...]:
        """Per block, what its program is compiled for and the keep-masks `(len(masked), B)` it takes.

        An attention that some but not all samples skip in some block is masked in every block where
        not every sample skips it (a mask of ones computes `out * 1 + v * 0`: `out`, up to XLA's
        rounding of a differently fused program), so blocks that differ only in which samples skip
        share one program. An attention every sample skips in a block is not computed there, as in
        `at_block`.
        """
        blocks = [self.at_block(idx) for idx in range(num_blocks)]
        partly_skipped = {t for b in blocks for t in PerturbationType if b.any_in_batch(t) and not b.all_in_batch(t)}
        plan = []
        for block in blocks:
            skipped = tuple(t for t in PerturbationType if block.all_in_batch(t))
            masked = tuple(t for t in PerturbationType if t in partly_skipped and t not in skipped)
            masks = np.stack([block.mask(t) for t in masked]) if masked else np.ones((0, len(self)), np.float32)
            plan.append((MaskedSkips(skipped, masked), masks))
        return tuple(plan)

    @staticmethod
    def empty(batch_size: int) -> BatchedPerturbationConfig:
        return BatchedPerturbationConfig(tuple(PerturbationConfig.empty() for _ in range(batch_size)))


class BlockSkips(Protocol):
    """What a block reads of its perturbations: `BlockPerturbations` (static, the unrolled forward) or
    `MaskedBlockPerturbations` (keep-masks as inputs, the block programs)."""

    def mask(self, perturbation_type: PerturbationType) -> object:
        """`(B,)` keep-mask: 0 where the sample skips this attention."""
        ...

    def any_in_batch(self, perturbation_type: PerturbationType) -> bool: ...

    def all_in_batch(self, perturbation_type: PerturbationType) -> bool: ...


@dataclasses.dataclass(frozen=True)
class BlockPerturbations:
    """The perturbations of a batch at one block: for each attention some sample skips there, which
    samples skip it (hashable: a static argument of the jitted unrolled forward)."""

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


@dataclasses.dataclass(frozen=True)
class MaskedSkips:
    """What a block program is compiled for when keep-masks are its inputs: the attentions every sample
    skips (not computed) and those blended with a per-sample keep-mask given at run time."""

    skipped: tuple[PerturbationType, ...] = ()
    masked: tuple[PerturbationType, ...] = ()

    def with_masks(self, masks: object) -> MaskedBlockPerturbations:
        """`masks` `(len(self.masked), B)`, rows in `masked`'s order (traced inside a program)."""
        return MaskedBlockPerturbations(self, masks)


@dataclasses.dataclass(frozen=True)
class MaskedBlockPerturbations:
    """`BlockPerturbations`' interface over `MaskedSkips` and its masks: what a block reads."""

    skips: MaskedSkips
    masks: object  # (len(skips.masked), B) keep-masks

    def mask(self, perturbation_type: PerturbationType) -> object:
        """`(B,)` keep-mask (0 where the sample skips); only for masked attentions."""
        return self.masks[self.skips.masked.index(perturbation_type)]

    def any_in_batch(self, perturbation_type: PerturbationType) -> bool:
        return perturbation_type in self.skips.skipped or perturbation_type in self.skips.masked

    def all_in_batch(self, perturbation_type: PerturbationType) -> bool:
        return perturbation_type in self.skips.skipped
