"""The stale-handle resume through the engine: the reference target refuses it, its
DoubleConsume mutant consumes again and is caught, the machine draws it (weighted) and the
reference campaign finds nothing; ``--weight`` is validated."""

import pytest

from adapters.protocol import Capabilities
from fuzz.campaign import CampaignOptions, run_campaign
from fuzz.cli import _weights
from fuzz.errors import UsageError
from fuzz.judge import judge_trace
from fuzz.runner import Session, Settings
from fuzz.targets import prepare, resolve
from fuzz.trace import Trace, dump_trace, load_trace
from refmodel import Resume, StaleResume, Start, Workflow

WF = Workflow(3, {2}, ("a", "b"))
OPS = [Start("t0"), Resume("t0", value="a"), StaleResume("t0", gate=2, value="b")]


def judged(target, tmp_path):
    adapter = prepare(resolve(target))
    variant = adapter.variants()[0]
    session = Session(adapter, variant, tmp_path / target.replace(":", "-"), Settings(op_timeout=60))
    try:
        return judge_trace(session.case, WF, OPS, adapter.capabilities(variant))
    finally:
        session.close()


def test_the_reference_refuses_a_stale_handle(tmp_path):
    verdict = judged("reference", tmp_path)
    assert verdict.verdict is None
    stale = verdict.observations[2]
    assert stale.outcome == "rejected" and stale.effects == ()
    assert "consumed already" in stale.error


def test_the_double_consume_mutant_is_caught_through_the_handle(tmp_path):
    verdict = judged("mutant:DoubleConsume", tmp_path)
    assert verdict.verdict == "✗" and verdict.first_divergence_index == 2
    assert verdict.divergence.category == "DoubleConsume"
    assert verdict.divergence.rule == "stale-handle-consumed-again"
    assert ("t0", 2, "b") in verdict.observations[2].effects


def test_a_trace_with_a_stale_resume_round_trips(tmp_path):
    path = tmp_path / "t.json"
    dump_trace(Trace(WF, tuple(OPS)), path)
    assert load_trace(path).operations == tuple(OPS)


@pytest.mark.slow
def test_the_reference_campaign_draws_it_weighted_and_finds_nothing(tmp_path):
    adapter = prepare(resolve("reference"))
    options = CampaignOptions(max_examples=80, seed=3, profile="ci", weights={"op:stale_resume": 4},
                              corpus_dir=tmp_path / "corpus", reports_dir=tmp_path / "reports",
                              workdir=tmp_path / "work")
    (result,) = run_campaign(adapter, list(adapter.variants()), options)
    # The tool errors' first lines in the failure: a CI log keeps nothing else of them.
    assert result.harness_errors == 0, result.harness_messages
    assert result.findings == [] and result.errors == []
    assert result.exercised.counts["CO"]["stale-handle resume"] >= 5


def test_expresses_needs_the_op_and_its_handle():
    assert not Capabilities().expresses("stale_resume")  # opt-in
    assert not Capabilities(operations=frozenset({"stale_resume"})).expresses("stale_resume")
    assert Capabilities(operations=frozenset({"stale_resume"}),
                        stale_handle="a checkpoint id").expresses("stale_resume")


def test_weights_flag():
    assert _weights(["op:stale_resume=3", "kind:sigkill=2"]) == {
        "op:stale_resume": 3.0, "kind:sigkill": 2.0}
    for bad in ("op:fork=2", "op:stale_resume=0", "op:stale_resume=x", "stale_resume"):
        with pytest.raises(UsageError):
            _weights([bad])
