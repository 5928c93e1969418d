"""``stale_resume`` on AutoGen: the state dict saved when the gate asked is loaded again.

Machinery only (no verdict): the op runs without a tool error on the sqlite store (whose history
holds that state), and the JSON store, which keeps only the latest state, declares it n/a.
"""

from __future__ import annotations

import json

import pytest

from adapters.autogen.statefmt import asking
from adapters.protocol import HarnessError, Resume, StaleResume, Start


@pytest.mark.parametrize("name", ["graphflow-loop-hitl-sqlite", "swarm-handoff-step-sqlite"])
def test_the_held_state_is_the_one_saved_when_the_gate_asked(make_driver, name):
    case = make_driver(name)
    assert case.run(Start("t0"))[0] == "interrupted"
    held = case.case.store.at_gate("t0", 2)
    assert held is not None and asking(json.loads(held)) == 2
    assert case.run(Resume("t0", value="a"))[0] == "completed"
    outcome, _, error = case.run(StaleResume("t0", gate=2, value="b"))
    assert not isinstance(error, HarnessError), error
    assert outcome in ("rejected", "completed", "interrupted")


def test_the_json_store_declares_it_not_expressible(adapter):
    for v in adapter.variants():
        caps = adapter.capabilities(v)
        assert caps.expresses("stale_resume") == (v.options["store"] == "sqlite")
        if v.options["store"] == "json":
            assert "latest" in caps.not_expressible["stale_resume"]
        else:
            assert "load_state" in caps.stale_handle
