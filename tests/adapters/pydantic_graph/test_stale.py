"""``stale_resume`` on pydantic-graph: the docs' idiom answers through the snapshot a caller
loaded while the gate was next; iter_from_persistence has only the persistence as a handle.

Machinery only (no verdict): the op runs without a tool error, and the declarations say which
spelling holds what (SimpleStatePersistence keeps no earlier snapshot for the docs' idiom).
"""

from __future__ import annotations

import pytest

from adapters.protocol import Resume, StaleResume, Start, Workflow

WF = Workflow(3, {2}, ("a", "b"))


@pytest.mark.parametrize("name", ["file-single-resume_docs-recover_ifp",
                                  "full-single-resume_ifp-recover_ifp"])
def test_the_held_handle_reaches_the_framework(harness, name):
    h = harness(name, WF)
    assert h.do(Start("t0"))[0] == "interrupted"
    assert h.do(Resume("t0", value="a"))[0] == "completed"
    outcome, _ = h.do(StaleResume("t0", gate=2, value="b"))
    assert outcome in ("completed", "interrupted") or (
        outcome[0] == "rejected" and "HarnessError" not in outcome[1]), outcome


def test_declarations(adapter):
    for v in adapter.variants():
        caps = adapter.capabilities(v)
        docs_on_simple = v.options["backend"] == "simple" and v.options["resume"] == "docs"
        assert caps.expresses("stale_resume") != docs_on_simple
        assert ("stale_resume" in caps.not_expressible) == docs_on_simple
