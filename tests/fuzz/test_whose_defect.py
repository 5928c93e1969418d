"""Issue 41, whose defect it is: the frameworks' own promises, caller-owned deviations, the
defect ledger and its links from the matrix.

Every test pairs what must happen with a setting in which it must not (another owner, another
tamper, a store the built-in one agrees with), so none can pass vacuously.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapters.protocol import PROMISE_PROPERTIES, Capabilities, Deviation, Promise, Variant
from fuzz import defects, promises
from fuzz.cli import main
from fuzz.judge import judge_trace
from fuzz.report import render
from fuzz.targets import FRAMEWORKS, resolve_registered
from fuzz.trace import Finding, Trace, dump_trace
from refmodel import Observation, Race, Resume, Start, StateView, Tamper, Workflow

DOCS = Path(__file__).resolve().parents[2] / "docs" / "frameworks"
WF = Workflow(1, {1}, ("a", "b"))


# -- the promise table ---------------------------------------------------------------------------


@pytest.mark.parametrize("target", sorted(FRAMEWORKS))
def test_every_variant_has_a_promise_or_its_absence_for_every_property(target):
    adapter = resolve_registered(target)
    for variant in adapter.variants():
        have = {p.property for p in adapter.promises(variant)}
        assert have == set(PROMISE_PROPERTIES), (variant.name, set(PROMISE_PROPERTIES) - have)


@pytest.mark.parametrize("target", sorted(FRAMEWORKS))
def test_the_docs_carry_the_promise_table_the_adapter_declares(target):
    text = (DOCS / f"{target.replace('-', '_')}.md").read_text(encoding="utf-8")
    begin, end = text.index(promises.BEGIN), text.index(promises.END) + len(promises.END) + 1
    assert text[begin:end] == promises.render_md(target), (
        f"docs/frameworks/{target.replace('-', '_')}.md is out of date: paste "
        f"`resumefuzz promises {target} --format md` between its markers")


def test_a_promise_says_its_source_or_why_nothing_is_promised():
    with pytest.raises(ValueError, match="source"):
        Promise("EO", quote="completed work is not re-run")
    with pytest.raises(ValueError, match="why"):
        Promise("EO")
    with pytest.raises(ValueError, match="not one of"):
        Promise("XX", why="x")
    assert Promise("EO", quote="q", source="s").promised and not Promise("EO", why="w").promised


def test_the_most_specific_promise_is_quoted():
    # LangGraph: a race's CO finding quotes the "promises nothing" entry narrowed to LostUpdate,
    # a DoubleConsume the interrupt docstring; a durability mode its own docstring line.
    race = promises.promise_for("langgraph", "sqlite-graph-sync-head-update", "CO", "LostUpdate")
    twice = promises.promise_for("langgraph", "sqlite-graph-sync-head-update", "CO",
                                 "DoubleConsume")
    assert not race.promised and twice.promised and "interrupt" in twice.source
    exit_ = promises.promise_for("langgraph", "sqlite-graph-exit-head-update", "PC")
    sync = promises.promise_for("langgraph", "sqlite-graph-sync-head-update", "PC")
    assert "'exit'" in exit_.quote and "'sync'" in sync.quote
    assert promises.promise_for("reference", "default", "PC") is None


# -- caller-owned deviations ---------------------------------------------------------------------


def test_a_caller_owned_deviation_says_what_the_caller_must_add():
    with pytest.raises(ValueError, match="remedy"):
        Deviation("LostUpdate", "docs", "scope", owner="caller")
    with pytest.raises(ValueError, match="owner"):
        Deviation("LostUpdate", "docs", "scope", owner="nobody")


class Scripted:
    def __init__(self, observations):
        self.observations = list(observations)

    def apply(self, op):
        return self.observations.pop(0)

    def close(self):
        pass


def _view(done=(), answers=(), pending=None):
    return StateView.of(WF, list(done), dict(answers), pending)


ASKED = Observation("interrupted", (), _view(pending=1))
DONE = Observation("completed", (("t0", 1, "a"),), _view([1], {1: "a"}))


def test_a_race_on_caller_owned_state_is_the_callers_d():
    ops = [Start("t0"), Race("t0", values=("a", "a"))]
    both = Observation("completed|completed", (("t0", 1, "a"), ("t0", 1, "a")), _view([1], {1: "a"}))
    owned = Deviation("LostUpdate", "docs: the dict is yours", "races", owner="caller",
                      remedy="a consume-once claim", ops=frozenset({"race"}))
    verdict = judge_trace(lambda wf: Scripted([ASKED, both]), WF, ops, Capabilities(), [owned])
    assert (verdict.verdict, verdict.owner, verdict.divergence.category) == (
        "D", "caller", "LostUpdate")
    verdict = judge_trace(lambda wf: Scripted([ASKED, both]), WF, ops, Capabilities(), [])
    assert (verdict.verdict, verdict.owner) == ("✗", "framework")


def test_a_deviation_for_forged_state_does_not_cover_an_invalid_tamper():
    forged = Deviation("InvalidPersist", "docs: the dict is yours", "forged dicts",
                       owner="caller", remedy="an HMAC", tamper_hows=frozenset({"forged"}))
    for how, verdict in (("forged", "D"), ("invalid", "✗")):
        ops = [Start("t0"), Tamper("t0", how=how), Resume("t0", value="a")]
        tampered = Observation("ok", (), _view(pending=1))
        judged = judge_trace(lambda wf: Scripted([ASKED, tampered, DONE]), WF, ops,
                             Capabilities(), [forged])
        assert judged.verdict == verdict, how


# -- the ledger ----------------------------------------------------------------------------------


def _entry(root, target, variant, *, fingerprint, verdict="✗", owner="framework", store=False,
           citation=""):
    ops = (Start("t0"), Race("t0", values=("a", "a")))
    both = Observation("completed|completed", (("t0", 1, "a"), ("t0", 1, "a")), _view([1], {1: "a"}))
    finding = Finding("LostUpdate", "CO", 1, "2 racers consumed gate 1: ['a', 'a']", verdict,
                      citation, owner=owner)
    versions = {"langgraph": "1.2.24", **({"store-factory": "m:f"} if store else {})}
    trace = Trace(WF, ops, target, variant, (ASKED, both), (ASKED, DONE), finding, "FAILED",
                  versions, fingerprint, "2026-12-07T00:00:00+00:00")
    path = Path(root) / target / variant / f"LostUpdate-{fingerprint}.json"
    dump_trace(trace, path)
    return path


def test_one_defect_however_many_variants_show_it(tmp_path):
    _entry(tmp_path, "langgraph", "sqlite-graph-sync-head-update", fingerprint="a1")
    _entry(tmp_path, "langgraph", "postgres-graph-sync-head-update", fingerprint="a2")
    _entry(tmp_path, "langgraph", "store-lmdb-graph-sync-head-update", fingerprint="a3",
           store=True)
    (ledger,) = defects.build(corpus_dir=tmp_path, upstream=tmp_path / "none.json")
    assert len(ledger.variants) == 3 and ledger.owner == "framework"
    assert ledger.property == "CO" and ledger.releases == ("1.2.24",)
    assert not ledger.promise.get("quote") and ledger.promise.get("why")  # LostUpdate: nothing


def test_a_defect_only_a_store_shows_is_the_stores(tmp_path):
    _entry(tmp_path, "langgraph", "store-lmdb-graph-sync-head-update", fingerprint="b1",
           store=True)
    (ledger,) = defects.build(corpus_dir=tmp_path, upstream=tmp_path / "none.json")
    assert ledger.owner == "store"


def test_a_caller_owned_d_is_its_own_defect_and_the_callers(tmp_path):
    _entry(tmp_path, "autogen", "graphflow-loop-hitl-json", fingerprint="c1", verdict="D",
           owner="caller", citation="docs")
    _entry(tmp_path, "autogen", "graphflow-loop-step-json", fingerprint="c2")
    owners = sorted((d.verdict, d.owner) for d in
                    defects.build(corpus_dir=tmp_path, upstream=tmp_path / "none.json"))
    assert owners == [("D", "caller"), ("✗", "framework")]


def test_upstream_links_are_read_never_written(tmp_path):
    _entry(tmp_path / "corpus", "langgraph", "sqlite-graph-sync-head-update", fingerprint="d1")
    (ledger,) = defects.build(corpus_dir=tmp_path / "corpus", upstream=tmp_path / "none.json")
    links = tmp_path / "upstream.json"
    links.write_text(json.dumps({ledger.id: "https://example.invalid/issues/1"}))
    (linked,) = defects.build(corpus_dir=tmp_path / "corpus", upstream=links)
    assert linked.upstream == "https://example.invalid/issues/1"
    assert "https://example.invalid/issues/1" in defects.render_md([linked])
    links.write_text("[1, 2]")
    with pytest.raises(Exception, match="defect id"):
        defects.build(corpus_dir=tmp_path / "corpus", upstream=links)


def test_the_matrix_links_a_cell_to_its_defect(tmp_path):
    from fuzz.matrix import build as matrix

    _entry(tmp_path / "corpus", "langgraph", "sqlite-graph-sync-head-update", fingerprint="e1")
    (ledger,) = defects.build(corpus_dir=tmp_path / "corpus", upstream=tmp_path / "none.json")
    (row,) = matrix(None, tmp_path / "results", tmp_path / "corpus", tmp_path / "reports")
    assert row.cells["CO"].verdict == "✗" and row.cells["CO"].detail["defect"] == ledger.id
    assert row.cells["CO"].detail["owner"] == "framework"
    # A store's own defect reads as the store's in its cell too.
    _entry(tmp_path / "corpus", "langgraph", "store-lmdb-graph-sync-head-update",
           fingerprint="e2", store=True)
    _entry(tmp_path / "corpus", "langgraph", "sqlite-graph-sync-head-update", fingerprint="e1")
    rows = {r.variant: r for r in matrix(None, tmp_path / "results", tmp_path / "corpus",
                                         tmp_path / "reports")}
    assert rows["store-lmdb-graph-sync-head-update"].cells["CO"].detail["owner"] == "framework"


def test_defects_command_refuses_bad_input_in_one_line(tmp_path, capsys):
    assert main(["defects", "--framework", "nope"]) == 2
    assert main(["defects", "--corpus", str(tmp_path / "missing")]) == 2
    (tmp_path / "corpus").mkdir()
    (tmp_path / "bad.json").write_bytes(b"\xff\xfe")
    assert main(["defects", "--corpus", str(tmp_path / "corpus"), "--upstream",
                 str(tmp_path / "bad.json")]) == 2
    err = capsys.readouterr().err
    assert len([line for line in err.splitlines() if line]) == 3 and "Traceback" not in err


# -- reports speak the framework's language ------------------------------------------------------


def test_a_report_quotes_the_framework_not_our_contract(tmp_path):
    path = _entry(tmp_path, "langgraph", "sqlite-graph-sync-head-update", fingerprint="f1")
    from fuzz.trace import load_trace

    trace = load_trace(path)
    text = render(trace, str(path))
    promise = text.split("**What the documentation promises**: ")[1].splitlines()[0]
    assert promise.startswith("langgraph promises nothing here") and "resume contract" not in promise
    caller = trace.with_(finding=Finding("LostUpdate", "CO", 1, "x", "D", "the docs",
                                         owner="caller"))
    assert "caller-owned deviation (D)" in render(caller, str(path))


def test_the_self_test_targets_keep_the_contract_words(tmp_path):
    path = _entry(tmp_path, "reference", "default", fingerprint="g1")
    from fuzz.trace import load_trace

    text = render(load_trace(path), str(path))
    assert "the resume contract's property CO" in text


def test_every_framework_promise_table_renders_without_a_variant():
    for target in FRAMEWORKS:
        assert promises.render_md(target).count("\n| ") >= len(PROMISE_PROPERTIES)
    assert Variant("x").options == {}


def test_a_witness_with_a_detour_is_read_last():
    # A bad output on the way to a finding of another category, or a recovery of a run that had
    # finished, lets a maintainer dismiss the witness: the matrix and the ledger prefer others.
    from refmodel import Recover

    from fuzz.trace import detours

    done = Observation("completed", (("t0", 1, "a"),), _view([1], {1: "a"}))
    plain = Trace(WF, (Start("t0"), Resume("t0", value="a")), "langgraph", "v", (ASKED, done),
                  (ASKED, done), Finding("StateMismatch", "PC", 1, "x"), "FAILED")
    assert detours(plain) == 0
    finished = plain.with_(operations=(*plain.operations, Recover("t0")),
                           observations=(ASKED, done, done),
                           finding=Finding("StateMismatch", "PC", 2, "x"))
    assert detours(finished) == 1
    bad = plain.with_(operations=(Start("t0", bad_output=1), Resume("t0", value="a")))
    assert detours(bad) == 1
    assert detours(bad.with_(finding=Finding("InvalidPersist", "CV", 1, "x"))) == 0


def test_a_record_quotes_the_framework_too(tmp_path):
    # A report with nothing to file (FIXED, or a caller-owned D) still says what the framework
    # promises, in its header: every report does.
    path = _entry(tmp_path, "langgraph", "sqlite-graph-sync-head-update", fingerprint="h1")
    from fuzz.trace import load_trace

    fixed = load_trace(path).with_(status="FIXED")
    text = render(fixed, str(path))
    assert "## Upstream issue: nothing to file" in text
    assert "- **What langgraph promises here**: langgraph promises nothing here" in text


def test_a_branch_of_a_forged_dict_is_still_forged():
    from refmodel import Fork

    from fuzz.judge import last_tamper

    history = [(Start("t0"), ASKED, ()), (Tamper("t0", how="forged"), ASKED, ()),
               (Fork("t0", gate=1, value="a", new_thread="f1"), DONE, ())]
    assert last_tamper(Fork("f1", gate=1, value="b", new_thread="f2"), history) == "forged"
    assert last_tamper(Fork("f1", gate=1, value="b", new_thread="f2"), history[:1]) is None


def test_the_upstream_links_beside_the_evidence_are_not_evidence(tmp_path):
    from fuzz import evidence

    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "upstream.json").write_text("{}")
    assert evidence.load_all(tmp_path / "results") == []
    with pytest.raises(Exception, match="no evidence files"):
        evidence.evidence_files([tmp_path / "results"])
