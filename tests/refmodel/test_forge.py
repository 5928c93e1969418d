"""``forge`` edits every stored part on its own, and each edit is schema-valid and new."""

from __future__ import annotations

from itertools import product

from refmodel import Durable, Workflow, forge, forge_parts
from refmodel.run import execute


def _reachable(workflow: Workflow):
    """Durable states a run of ``workflow`` records (every prefix, every answer)."""
    out = {Durable()}
    for answers in product(workflow.values, repeat=len(workflow.gates)):
        durable, given = Durable(), list(answers)
        while True:
            events = execute(workflow, durable, answer=given.pop(0) if durable.pending else None)
            for event in events:
                if hasattr(event, "durable"):
                    out.add(event.durable)
            last = events[-1] if events else None
            if last is None or not getattr(last, "durable", None) or last.durable.pending is None:
                break
            durable = last.durable
    return out


WORKFLOWS = [Workflow(n, frozenset(g), ("a", "b")) for n, g in
             [(1, ()), (1, (1,)), (2, (2,)), (3, (1, 3)), (4, (2, 3))]]


def test_every_part_is_forged_alone_schema_valid_and_new():
    seen = set()
    for workflow in WORKFLOWS:
        for durable in _reachable(workflow):
            for part in forge_parts(workflow, durable):
                forged = forge(workflow, durable, part)
                assert forged != durable, (workflow, durable, part)
                assert forged.view(workflow).is_valid(workflow), (workflow, durable, part)
                if part.startswith("answer:"):
                    assert forged.done == durable.done and forged.pending == durable.pending
                if part == "pending":
                    assert (forged.done, forged.answers) == (durable.done, durable.answers)
                seen.add(part.split(":")[0])
    assert seen == {"done", "answer", "pending"}


def test_the_default_forgery_is_unchanged():
    workflow = Workflow(3, frozenset({2}), ("a", "b"))
    assert forge(workflow, Durable((1, 2), ((2, "a"),))) == Durable((1, 2), ((2, "b"),))
    assert forge(workflow, Durable((1,), (), 2)) == Durable((1, 2), ((2, "a"),))
