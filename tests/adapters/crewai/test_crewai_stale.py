"""``stale_resume`` on CrewAI: the flow id (``@persist``) or the pause's checkpoint location.

Machinery only (no verdict): the op runs without a tool error, and a checkpoint variant restores
the location recorded when the gate paused, which stays the one recorded for that gate.
"""

from __future__ import annotations

from adapters.protocol import HarnessError, Resume, StaleResume, Start, Workflow

from crewai_test_support import missing_pause_checkpoint, retry_race

WF = Workflow(3, {2}, ("a", "b"))


def _run(h):
    outcome = h.do(Start("t0"))[0]
    assert outcome == "interrupted", outcome
    held = (h.case.side.get("t0") or {}).get("gates", {}).get("2")
    if held is None and h.case.backend not in ("persist", "custom"):
        missing_pause_checkpoint(h)
    assert h.do(Resume("t0", value="a"))[0] == "completed"
    outcome, _ = h.do(StaleResume("t0", gate=2, value="b"))
    assert not isinstance(outcome, HarnessError), outcome
    assert isinstance(outcome, Exception) or outcome in ("completed", "interrupted")
    return held


@retry_race
def test_persist_answers_through_the_flow_id(harness):
    assert _run(harness("persist-sqlite", WF)) is None  # @persist records no checkpoint location


@retry_race
def test_a_checkpoint_variant_restores_the_pause_location(harness):
    h = harness("checkpoint-sqlite-from_checkpoint", WF)
    held = _run(h)
    assert held is not None, h.case.side.get("t0")
    assert h.case._gate_checkpoint("t0", 2) is not None, h.case.side.get("t0")


def test_every_variant_names_its_handle(adapter):
    for v in adapter.variants():
        caps = adapter.capabilities(v)
        assert caps.expresses("stale_resume")
        assert ("flow id" in caps.stale_handle) == (v.options["backend"] == "persist")
