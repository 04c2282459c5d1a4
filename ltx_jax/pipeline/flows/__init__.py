"""The flows, one module each (named like ltx-pipelines' files), and the registry that names them.

    from ltx_jax.pipeline import flows
    flows.names()            # what `--pipeline` and `LTXPipeline(flow=...)` accept
    flows.get("two-stage")   # its `Flow`: needs, defaults, plan
    flows.register(my_flow)  # a flow of your own, usable everywhere a name is

The registry is the only place that tells flows apart by name; everything else reads the `Flow`.
"""

from __future__ import annotations

from ltx_jax.pipeline.flows import (
    a2vid_two_stage,
    distilled,
    dubit,
    ic_lora,
    keyframe_interpolation,
    retake,
    retake_guided,
    t2a_one_stage,
    ti2vid_one_stage,
    ti2vid_two_stages,
    ti2vid_two_stages_hq,
)
from ltx_jax.pipeline.flows.flow import Flow, ModelVersion, Needs, Plan, Stage

_REGISTRY: dict[str, Flow] = {}


def register(flow: Flow) -> Flow:
    """Makes `flow` known by its name; a name is registered once."""
    if not isinstance(flow, Flow):
        raise TypeError(f"register takes a Flow, got {flow!r}.")
    if flow.name in _REGISTRY and _REGISTRY[flow.name] is not flow:
        raise ValueError(f"A flow named {flow.name!r} is already registered ({_REGISTRY[flow.name].source}).")
    _REGISTRY[flow.name] = flow
    return flow


def get(flow: str | Flow) -> Flow:
    """The registered flow of that name (a `Flow` is returned as it is); raises naming the choices."""
    if isinstance(flow, Flow):
        return flow
    if flow not in _REGISTRY:
        raise ValueError(f"flow must be one of {list(_REGISTRY)}, got {flow!r}.")
    return _REGISTRY[flow]


def names() -> tuple[str, ...]:
    """The registered flows' names, built-in ones first."""
    return tuple(_REGISTRY)


for _module in (
    ti2vid_one_stage, ti2vid_two_stages, ti2vid_two_stages_hq, distilled, keyframe_interpolation, ic_lora,
    a2vid_two_stage, retake, retake_guided, dubit, t2a_one_stage,
):  # fmt: skip
    register(_module.FLOW)

__all__ = ["Flow", "ModelVersion", "Needs", "Plan", "Stage", "get", "names", "register"]
