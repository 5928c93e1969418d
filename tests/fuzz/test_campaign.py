"""Acceptance: the fuzzer finds every mutant under its own label, and nothing on the reference.

These run real campaigns (forked workers, SIGKILL barriers, ledger) on the built-in targets.
Budgets are examples, not seconds, and seeds are fixed, so they are deterministic.
"""

import json

import pytest

from fuzz.campaign import CampaignOptions, run_campaign
from fuzz.replay import Replayer
from fuzz.targets import prepare, resolve
from refmodel import MUTANTS

pytestmark = pytest.mark.slow


def campaign(target, tmp_path, examples, seed=1, stop_on_finding=False, mode="fork"):
    adapter = prepare(resolve(target))
    options = CampaignOptions(max_examples=examples, seed=seed, profile="ci",
                              stop_on_finding=stop_on_finding, mode=mode,
                              corpus_dir=tmp_path / "corpus", reports_dir=tmp_path / "reports",
                              workdir=tmp_path / "work")
    (result,) = run_campaign(adapter, list(adapter.variants()), options)
    return result


# Mutants that need a worker to kill (Stuck: recovery refused after a SIGKILL) or processes to
# race (LostUpdate) run with forked workers, which also covers that plumbing end to end; the
# others run in process (the same machine, judge, shrink and corpus writing, without a fork
# per case): a third less time for those seven here, measured under load (CI's limit).
FORKED = {"Stuck", "LostUpdate"}


@pytest.mark.parametrize("mutant", MUTANTS)
def test_each_mutant_is_found_labelled_and_replays(mutant, tmp_path):
    # The first finding must be the mutant's own category: a mutant is wrong in one way only.
    result = campaign(f"mutant:{mutant}", tmp_path, examples=600, stop_on_finding=True,
                      mode="fork" if mutant in FORKED else "inprocess")
    categories = {f.category for f in result.findings}
    assert mutant in categories, (f"{mutant} not found in {result.examples} examples: "
                                  f"{categories}; flaky {result.flaky}; errors {result.errors}")
    found = next(f for f in result.findings if f.category == mutant)
    entry = json.loads(open(found.corpus).read())
    assert entry["finding"]["category"] == mutant and entry["status"] == "FAILED"
    report = open(found.report).read()
    assert f"# {mutant} in mutant:{mutant}" in report and "resumefuzz replay" in report
    assert Replayer().replay(found.corpus).status == "FAILED"
    assert Replayer(target="reference").replay(found.corpus).status == "FIXED"


def test_reference_finds_nothing(tmp_path):
    result = campaign("reference", tmp_path, examples=150)
    assert result.findings == [] and result.flaky == []
    assert result.harness_errors == 0 and result.errors == []  # never a harness error either
    assert result.operations > result.examples  # examples really ran operations
    assert not (tmp_path / "corpus").exists()


def test_a_script_generator_that_raises_loses_no_finding_and_is_shown(tmp_path):
    """An exception from the adapter's checked-script generator (``reproduction``) is a tool
    error: the campaign goes on, the finding is kept, its report says what was raised and gives
    the replay line, and the result lists it.  (A LangGraph campaign once died of one, all
    its remaining variants with it, when the generator read source that had changed on disk.)"""
    adapter = prepare(resolve("mutant:Replay"))

    def broken(variant, workflow, evidence):
        raise RuntimeError("generator bug")

    adapter.reproduction = broken
    options = CampaignOptions(max_examples=300, seed=1, profile="ci", stop_on_finding=True,
                              mode="inprocess", corpus_dir=tmp_path / "corpus",
                              reports_dir=tmp_path / "reports", workdir=tmp_path / "work")
    (result,) = run_campaign(adapter, list(adapter.variants()), options)
    assert [f.category for f in result.findings] == ["Replay"] and not result.errors
    (message,) = result.script_errors
    assert "RuntimeError: generator bug" in message
    text = open(result.findings[0].report).read()
    assert "generator failed on this finding" in text
    assert "resumefuzz replay " in text
