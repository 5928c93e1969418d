"""``stale_resume`` on LlamaIndex: core answers through the Context dict stored when the gate
asked; server and DBOS send the question's answer to the handler again.

Machinery only (no verdict): the op runs without a tool error, and every variant names its
handle.  The server variants run in the engine's workers (``test_llamaindex_engine.py``).
"""

from __future__ import annotations

import pytest

from adapters.protocol import HarnessError, Resume, StaleResume, Start, Workflow

WF = Workflow(3, {2}, ("a", "b"))


@pytest.mark.parametrize("name", ["core-wait-idle", "core-event-step"])
def test_core_restores_the_snapshot_of_the_question(make_driver, name):
    d = make_driver(name, WF)
    assert d.run(Start("t0"))[0] == "interrupted"
    assert d.run(Resume("t0", value="a"))[0] == "completed"
    rows = len(d.case.store.rows("t0"))
    outcome, _, error = d.run(StaleResume("t0", gate=2, value="b"))
    assert not isinstance(error, HarnessError), error
    assert outcome in ("rejected", "completed", "interrupted")
    assert error is not None or len(d.case.store.rows("t0")) > rows  # the restored run saved


def test_every_variant_names_its_handle(adapter):
    for v in adapter.variants():
        caps = adapter.capabilities(v)
        assert caps.expresses("stale_resume")
        core = v.options["backend"] == "core"
        assert ("Context.to_dict()" in caps.stale_handle) == core
        assert ("handler id" in caps.stale_handle) == (not core)
