"""Forged tampers by part, end to end on the reference target: the store of
``mutant:UncheckedPending`` checks every part but the pending-gate record, so of the forgeries
of each part only the pending one is caught; the machine draws parts and the evidence counts
them."""

from __future__ import annotations

import json

import pytest

from fuzz.evidence import Exercise
from fuzz.replay import Replayer
from fuzz.trace import Trace
from refmodel import Model, Observation, Recover, Resume, Start, Tamper, Workflow, World, forge_parts

GATED = Workflow(2, {1, 2}, ("a", "b"))


def _traces():
    """Start, (resume to gate 2), a forged tamper of each part, then recover and resume."""
    model = Model(GATED)
    for prefix in ([Start("t0")], [Start("t0"), Resume("t0", value="a")]):
        world = World()
        for op in prefix:
            (_, world), *_ = model.step(world, op)
        for part in forge_parts(GATED, world.get("t0").durable):
            ops = (*prefix, Tamper("t0", how="forged", part=part), Recover("t0"),
                   Resume("t0", value="b"))
            yield part, Trace(GATED, ops, "mutant:UncheckedPending")


@pytest.mark.parametrize("target", ["mutant:UncheckedPending", "reference"])
def test_only_a_forgery_of_the_pending_record_gets_past_the_unchecked_store(target):
    statuses = {}
    for part, trace in _traces():
        result = Replayer(target=target).replay_trace(trace)
        assert result.status in ("FIXED", "CHANGED"), result.detail  # never ERROR
        statuses.setdefault(part.split(":")[0], set()).add(
            result.category)
    if target == "reference":
        assert all(s == {None} for s in statuses.values()), statuses
    else:
        assert statuses.pop("pending") == {"InvalidPersist"}
        assert statuses and all(s == {None} for s in statuses.values()), statuses


def test_the_evidence_counts_forged_tampers_by_part():
    ex = Exercise()
    ops = [Start("t0"), Tamper("t0", how="forged", part="answer:1"), Recover("t0"),
           Start("t1"), Tamper("t1", how="forged"), Recover("t1")]
    for op in ops:
        ex.op(op=op, observed=Observation("rejected"))
    assert ex.to_json()["CV"] == {"tamper:forged": 1, "tamper:forged/answer": 1}


@pytest.mark.slow
def test_a_campaign_finds_the_unchecked_pending_record_through_a_pending_forgery(tmp_path):
    from fuzz.campaign import CampaignOptions, run_campaign
    from fuzz.targets import prepare, resolve

    adapter = prepare(resolve("mutant:UncheckedPending"))
    options = CampaignOptions(max_examples=600, seed=1, profile="ci", stop_on_finding=True,
                              corpus_dir=tmp_path / "corpus", reports_dir=tmp_path / "reports",
                              workdir=tmp_path / "work")
    (result,) = run_campaign(adapter, list(adapter.variants()), options)
    found = [f for f in result.findings if f.category == "InvalidPersist"]
    assert found, f"not found in {result.examples} examples: {result.findings}"
    ops = json.loads(open(found[0].corpus).read())["operations"]
    assert {"op": "tamper", "part": "pending"}.items() <= next(
        o for o in ops if o["op"] == "tamper" and o.get("part") == "pending").items()
