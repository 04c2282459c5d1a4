"""A LoRA file read for `ltx_jax.model.lora.with_lora`: its factors matched to the DiT's kernels and
placed on the devices, unfused.

    stage_2 = with_lora(model, load_lora(model, Lora("distilled-lora.safetensors", 0.8), mesh=mesh))
"""

from __future__ import annotations

import logging

import jax
from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P

from ltx_jax.convert.dit_tensors import Lora, lora_pairs
from ltx_jax.convert.placement import make_array_from_reader
from ltx_jax.convert.state_dict import expected_keys
from ltx_jax.model.lora import LoraWeights
from ltx_jax.model.model import LTXModel

logger = logging.getLogger(__name__)


def load_lora(model: LTXModel, lora: Lora, *, mesh: Mesh | None = None) -> LoraWeights:
    """The factors of `lora` for `model`'s Linear kernels, replicated on `mesh` (None: the default
    device). Raises `ValueError` if a factor's shape does not fit its weight or nothing matches;
    modules the model lacks are skipped with a warning, as when fusing at load time."""
    table = expected_keys(model)
    sharding = SingleDeviceSharding(jax.devices()[0]) if mesh is None else NamedSharding(mesh, P())
    factors, unmatched, problems = {}, [], []
    for key, (a, b) in lora_pairs(lora).items():
        if key not in table:
            unmatched.append(key)
            continue
        path, transposed, (out_features, in_features), _ = table[key]
        rank = a.shape[0]
        if not transposed or a.shape != (rank, in_features) or b.shape != (out_features, rank):
            problems.append(f"{key}: A {a.shape}, B {b.shape} for a weight of {(out_features, in_features)}")
            continue
        factors[path] = tuple(make_array_from_reader(x.shape, sharding, x.__getitem__) for x in (a, b))
    if problems:
        raise ValueError(f"LoRA {lora.path} does not fit this DiT: " + "; ".join(problems[:8]) + ".")
    if not factors:
        raise ValueError(f"LoRA {lora.path} matches no DiT weight (e.g. {unmatched[0]!r}).")
    if unmatched:
        logger.warning("LoRA %s: %d modules are not in this DiT and are skipped", lora.path, len(unmatched))
    return LoraWeights(factors, lora.strength)
