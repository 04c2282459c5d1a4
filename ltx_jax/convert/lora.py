"""A LoRA file read for `ltx_jax.model.lora.with_lora`: its factors matched to the DiT's kernels and
placed on the devices, unfused.

    stage_2 = with_lora(model, load_lora(model, Lora("distilled-lora.safetensors", 0.8), mesh=mesh))
"""

from __future__ import annotations

import functools
import logging
import os

import jax
from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P

from ltx_jax.convert.dit_tensors import Lora, lora_modules
from ltx_jax.convert.placement import make_array_from_reader, place_concurrently
from ltx_jax.convert.safetensors_file import SafetensorsFile
from ltx_jax.convert.state_dict import expected_keys
from ltx_jax.model.lora import LoraWeights
from ltx_jax.model.model import LTXModel

logger = logging.getLogger(__name__)


def load_lora(model: LTXModel, lora: Lora, *, mesh: Mesh | None = None, progress: bool = True) -> LoraWeights:
    """The factors of `lora` for `model`'s Linear kernels, replicated on `mesh` (None: the default
    device), read and placed `placement.LOAD_THREADS` tensors at a time (the distilled LoRA of LTX-2.3
    is 7.4 GB), with a progress bar on stderr. Raises `ValueError` (from the file's header, before
    anything is read) if a factor's shape does not fit its weight or nothing matches; modules the model
    lacks are skipped with a warning, as when fusing at load time."""
    table = expected_keys(model)
    sharding = SingleDeviceSharding(jax.devices()[0]) if mesh is None else NamedSharding(mesh, P())
    file = SafetensorsFile(lora.path)
    jobs, sizes, unmatched, problems = {}, {}, [], []
    for key, names in lora_modules(lora).items():
        if key not in table:
            unmatched.append(key)
            continue
        path, transposed, (out_features, in_features), _ = table[key]
        a, b = (file.info(names[part]) for part in ("lora_A", "lora_B"))
        rank = a.shape[0]
        if not transposed or a.shape != (rank, in_features) or b.shape != (out_features, rank):
            problems.append(f"{key}: A {a.shape}, B {b.shape} for a weight of {(out_features, in_features)}")
            continue
        for factor, info, name in ((0, a, names["lora_A"]), (1, b, names["lora_B"])):
            read = functools.partial(file.read, name)
            jobs[path, factor] = functools.partial(make_array_from_reader, info.shape, sharding, read)
            sizes[path, factor] = info.nbytes
    if problems:
        raise ValueError(f"LoRA {lora.path} does not fit this DiT: " + "; ".join(problems[:8]) + ".")
    if not jobs:
        raise ValueError(f"LoRA {lora.path} matches no DiT weight (e.g. {unmatched[0]!r}).")
    if unmatched:
        logger.warning("LoRA %s: %d modules are not in this DiT and are skipped", lora.path, len(unmatched))
    placed = place_concurrently(jobs, sizes, f"loading {os.path.basename(file.path)}", progress)
    factors = {path: (placed[path, 0], placed[path, 1]) for path, factor in jobs if factor == 0}
    return LoraWeights(factors, lora.strength)
