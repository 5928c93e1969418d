"""``stale_resume`` on LangGraph: the handle each resume spelling holds reaches the framework.

Machinery only (no verdict): the op runs without a tool error, and the recorded call is the one
``Capabilities.stale_handle`` names: ``Command(resume=v)`` at the checkpoint where the gate asked
(head, cpid), or ``Command(resume={id: v})`` with that interrupt's id (map, mapstrict).
"""

from __future__ import annotations

import pytest

from adapters.protocol import HarnessError, Resume, StaleResume, Start
from adapters.calls import read_calls
from fuzz.testing import InProcessCase


@pytest.mark.parametrize("name, shape", [
    ("sqlite-graph-sync-head-update", "Command(resume='b'), checkpoint("),
    ("sqlite-graph-sync-cpid-update", "Command(resume='b'), checkpoint("),
    ("sqlite-graph-sync-map-update", "Command(resume={i.id: 'b' for i in graph.get_state(checkpoint("),
    ("memory-func-sync-head-update", "Command(resume='b'), checkpoint("),
])
def test_the_stale_handle_is_the_spelling_s_own(adapter, variant, workflow, tmp_path, name, shape):
    case = InProcessCase(adapter, variant(name), workflow, tmp_path)
    try:
        assert case.run(Start("t0"))[0] == "interrupted"
        assert case.run(Resume("t0", value="a"))[0] == "completed"
        before = len(read_calls(case.workdir))
        outcome, _, error = case.run(StaleResume("t0", gate=2, value="b"))
        assert not isinstance(error, HarnessError), error
        assert outcome in ("rejected", "completed", "interrupted", "crashed")
        calls = [src for kind, src in read_calls(case.workdir)[before:] if kind == "call"]
        assert calls and shape in calls[-1], calls
    finally:
        case.close()


def test_every_variant_names_its_handle(adapter):
    for v in adapter.variants():
        caps = adapter.capabilities(v)
        assert caps.expresses("stale_resume") and caps.stale_handle
        assert ("interrupt id" in caps.stale_handle) == v.options["resume"].startswith("map")
