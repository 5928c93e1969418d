"""Shapes (docs/contract.md §7): what the AutoGen variants declare, and what a shaped trace gets.

No variant runs a shape yet: every one declares none, with a reason per feature, so a shaped
corpus entry replays as ERROR with that reason (never a verdict), and a shaped finding has no
reproduction script (its report gives the replay line).
"""

from __future__ import annotations

from types import SimpleNamespace

from refmodel import SHAPE_FEATURES
from refmodel.workflow import Loop, Shape, Task, Workflow

from fuzz.minimize import shape_inexpressible

PARALLEL = Workflow.of(Shape(((Task(),), (Task(1), Task(0)), (Task(),))))
LOOPED = Workflow.of(Shape(((Task(1),), (Task(),)), Loop(1, 2, "a")))


def test_no_variant_declares_a_shape_and_each_feature_has_a_reason(adapter):
    for v in adapter.variants():
        caps = adapter.capabilities(v)
        assert caps.shapes == frozenset()
        for feature in SHAPE_FEATURES:
            assert caps.not_expressible[f"shape:{feature}"], (v.name, feature)
        assert "linear chains only" in caps.not_expressible["shape"]


def test_swarm_parallel_is_autogens_graphflow_parallel_is_the_adapters(adapter):
    for v in adapter.variants():
        reason = adapter.capabilities(v).not_expressible["shape:parallel"]
        if v.options["team"] == "swarm":
            assert reason.startswith("Swarm has no fan-out or join")
        else:
            assert reason.startswith("not built by this adapter")
            assert "activation='all'" in reason


def test_a_shaped_workflow_is_inexpressible_with_the_variants_reason(adapter):
    for v in adapter.variants():
        caps = adapter.capabilities(v)
        for workflow in (PARALLEL, LOOPED):
            assert shape_inexpressible(workflow, caps) == caps.not_expressible["shape"]


def test_a_shaped_trace_has_no_reproduction_script(adapter):
    variant = next(v for v in adapter.variants() if v.name == "graphflow-split-hitl-sqlite")
    evidence = SimpleNamespace(ops=(), step=0, calls=())  # never read: the shape decides first
    for workflow in (PARALLEL, LOOPED):
        assert adapter.reproduction(variant, workflow, evidence) is None
