"""A campaign a user can act on (issue 42): progress lines that name their variant, a summary
that lists the variants never reached, a finding the corpus has reported as known and written
nowhere, tracked evidence written only when asked, and store findings owned by replaying them on
the framework's own store."""

from __future__ import annotations

import json

import pytest

from fuzz import corpus
from fuzz.baseline import Baseline
from fuzz.campaign import Found, VariantResult, _witness
from fuzz.cli import _counts, _Display, _summary, main
from fuzz.rate import Rate
from fuzz.replay import ReplayResult


def files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_evidence_is_written_only_when_asked(in_tmp):
    assert main(["fuzz", "reference", "--max-examples", "3", "--seed", "1"]) == 0
    assert not (in_tmp / "results").exists()
    assert main(["fuzz", "reference", "--max-examples", "3", "--seed", "1",
                 "--results", "mine"]) == 0
    assert (in_tmp / "mine" / "reference" / "default.json").is_file()


def test_a_finding_the_corpus_has_is_known_and_writes_nothing(in_tmp, capsys):
    args = ["fuzz", "mutant:LostUpdate", "--max-examples", "20", "--seed", "1", "--json"]
    assert main(args) == 1
    first = json.loads(capsys.readouterr().out)["findings"]
    assert first and all(f["known"] is None for f in first)
    before = {p: (in_tmp / p).read_bytes() for p in files(in_tmp)}
    assert main(args) == 1  # still found: a known defect is still a defect
    again = json.loads(capsys.readouterr().out)["findings"]
    assert again and all(f["known"] for f in again), again
    assert {f["corpus"] for f in again} <= {f["corpus"] for f in first}
    assert {p: (in_tmp / p).read_bytes() for p in files(in_tmp)} == before


def test_include_framework_needs_a_store(in_tmp, capsys):
    assert main(["fuzz", "reference", "--include-framework"]) == 2
    assert "--include-framework needs --store" in capsys.readouterr().err


def test_only_the_stores_findings_count_under_store():
    class Args:
        store, include_framework = "mypkg:make", False

    assert _counts({"owner": "store"}, Args) and not _counts({"owner": "framework"}, Args)
    Args.include_framework = True
    assert _counts({"owner": "framework"}, Args)
    Args.store = None
    assert _counts({"owner": "framework"}, Args)


def test_plain_progress_names_every_variant_and_the_summary_what_was_never_reached(capsys):
    display = _Display("langgraph", quiet=False, to_stderr=False)
    assert display.plain  # captured output is no terminal
    result = VariantResult("sqlite-graph-sync-head-update")
    with display:
        display.update("example", variant=result.variant, result=result)
        found = Found(result.variant, "LostUpdate", "CO", 2, "✗", "c.json", "r.md",
                      owner="framework", known="abc123", why_owner="shown on x too")
        result.findings.append(found)
        display.update("finding", variant=result.variant, result=result, found=found)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines and all("[sqlite-graph-sync-head-update]" in line for line in lines), out
    assert "known LostUpdate-abc123" in out
    _summary("langgraph", [result], 1.0, ["memory-graph-sync-head-update"], store=True)
    out = capsys.readouterr().out
    assert "not reached (1 of 2 variants" in out and "memory-graph-sync-head-update" in out
    assert "the framework's (shown on x too)" in out and "known LostUpdate-abc123" in out


def test_a_known_defect_is_one_of_the_same_identity(in_tmp):
    from fuzz.trace import load_trace

    assert main(["fuzz", "mutant:LostUpdate", "--max-examples", "20", "--seed", "1"]) == 1
    path = next(in_tmp.joinpath("corpus").rglob("*.json"))
    trace = load_trace(path)
    assert corpus.known(trace, in_tmp / "corpus") == path
    other = trace.with_(fingerprint="000000000000")  # another trace of the same defect
    assert corpus.known(other, in_tmp / "corpus") == path
    elsewhere = trace.with_(variant="another", fingerprint="000000000000")
    assert corpus.known(elsewhere, in_tmp / "corpus") is None


def test_a_shorter_trace_that_never_came_back_is_no_witness():
    long, short = object(), object()
    assert _witness(long, Rate(3, 5), short, Rate(0, 5)) == (long, Rate(3, 5))
    assert _witness(long, Rate(3, 5), short, Rate(1, 5)) == (short, Rate(1, 5))
    assert _witness(long, None, short, None) == (short, None)


class _Variant:
    def __init__(self, name):
        self.name = name


class _StoreAdapter:
    """A store adapter whose one variant is compared with the built-in ``builtin``."""

    name = "fake"

    def variants(self):
        return [_Variant("store-mine-x")]

    def baseline_variant(self, variant):
        return "builtin"

    def store_methods(self, variant):
        return {"LostUpdate": "put_writes"}


class _Replayer:
    def __init__(self, statuses):
        self.statuses = list(statuses)

    def replay_trace(self, trace):
        assert trace.variant == "builtin"
        status = self.statuses.pop(0)
        return ReplayResult("", status, "LostUpdate", "LostUpdate" if status == "FAILED" else None,
                            "why", step=1)


@pytest.fixture
def store_trace():
    from fuzz.trace import Finding, Trace
    from refmodel.workflow import Workflow

    finding = Finding("LostUpdate", "CO", 1, "racers consumed twice")
    return Trace(Workflow(1, {1}, ("a",)), (), "fake", "store-mine-x", finding=finding)


@pytest.mark.parametrize("statuses, owner, said", [
    (["FIXED", "FAILED"], "framework", "shown on the framework's own builtin too"),
    (["FIXED"] * 3, "store", "Where to look in the store: put_writes"),
    (["ERROR"] * 3, "store", "did not run (a tool error"),
])
def test_a_store_finding_is_owned_by_its_replay_on_the_builtin_store(store_trace, statuses,
                                                                      owner, said):
    base = Baseline(_StoreAdapter(), 10.0)
    base._replayer = _Replayer(statuses)
    trace, ownership = base.own(store_trace)
    assert ownership.owner == owner == trace.finding.owner
    assert said in trace.finding.note, trace.finding.note


def test_a_store_findings_rate_is_measured_on_that_store(in_tmp):
    """The replays that measure a timing-dependent finding's rate run on the store the campaign
    ran on.  They were refused as an entry naming a store factory ("replay it with --store"), so
    every such finding on a store under test was dropped as never coming back."""
    from fuzz.campaign import CampaignOptions, _rate
    from fuzz.targets import prepare, resolve
    from fuzz.trace import Finding, Trace
    from refmodel import Race, Start, Workflow

    adapter = prepare(resolve("mutant:LostUpdate"))
    finding = Finding("LostUpdate", "CO", 1, "racers consumed twice")
    trace = Trace(Workflow(1, {1}, ("a",)), (Start("t0"), Race("t0", values=("a", "a"),
                                                                forced=True)),
                  "mutant:LostUpdate", "default", finding=finding,
                  versions={"store-factory": "mypkg.savers:make_saver"})
    rate = _rate(adapter, trace, CampaignOptions(op_timeout=30, mode="inprocess"))
    assert (rate.k, rate.n) == (5, 5)


def test_fuzz_refuses_a_corpus_file_that_is_no_trace_up_front(in_tmp, capsys):
    bad = in_tmp / "corpus" / "reference" / "default" / "bad.json"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(bytes(range(256)))
    assert main(["fuzz", "reference", "--max-examples", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.json" in err and "UTF-8" in err
    assert files(in_tmp) == ["corpus/reference/default/bad.json"]


@pytest.mark.parametrize("framework", ["langgraph", "pydantic_graph", "crewai"])
def test_a_store_finding_names_where_to_look_in_the_stores_own_api(framework):
    """Each framework with a store extension point says which of the store's methods a
    finding implicates, in that API's names; an error the store raised names its own."""
    import importlib

    from fuzz.baseline import where_to_look

    table = importlib.import_module(f"adapters.{framework}.custom").STORE_METHODS
    api = {"langgraph": "get_tuple", "pydantic_graph": "load_next", "crewai": "load_state"}
    assert api[framework] in where_to_look(table, "StateMismatch", "stale read (...): x")
    for category in ("StateMismatch", "Replay", "PrefixReplay", "DoubleConsume", "LostUpdate",
                     "Stuck", "InvalidPersist"):
        assert where_to_look(table, category, "persisted state differs"), category
    assert where_to_look(table, "StateMismatch", "RuntimeError: lag [in MySaver.get_tuple]") == ""
