"""Replay refuses an entry whose operation the variant now declares n/a.

An entry recorded before an adapter declared an idiom n/a (LangGraph's functional-API
``update_state`` fork) would otherwise be judged and blamed on the framework; ``replay`` must
say ERROR with the variant's own reason, and replay the same entry as usual where it is
expressible.
"""

from dataclasses import replace

from adapters.reference import ReferenceAdapter
from fuzz.replay import Replayer, inexpressible
from fuzz.targets import prepare
from fuzz.trace import Trace
from refmodel import CrashAt, Fork, Race, Start, Workflow

REASON = "this store keeps one thread per file: a fork has nowhere to go"


class NoForkReference(ReferenceAdapter):
    def capabilities(self, variant):
        caps = super().capabilities(variant)
        return replace(caps, operations=caps.operations - {"fork"},
                       not_expressible={"fork": REASON})


def trace() -> Trace:
    return Trace(workflow=Workflow(n=1, gates=(1,), values=("a", "b")),
                 operations=(Start("t0"), Fork("t0", gate=1, value="a", new_thread="f1")))


def test_an_op_the_variant_declares_na_is_an_error_with_its_reason():
    result = Replayer(adapters={"reference": prepare(NoForkReference())}).replay_trace(trace())
    assert result.status == "ERROR"
    assert "step 2 (fork) is n/a on this variant" in result.detail and REASON in result.detail


def test_the_same_entry_replays_where_it_is_expressible():
    assert Replayer().replay_trace(trace()).status == "FIXED"


def test_inexpressible_names_crash_points_the_variant_lacks():
    caps = replace(ReferenceAdapter().capabilities(None), crash_kinds=frozenset({"exception"}))
    op = Start("t0", crash=CrashAt(task=1, phase="before_effect", kind="sigkill"))
    assert "sigkill@before_effect" in inexpressible(op, caps)
    assert inexpressible(Start("t0"), caps) is None


def test_a_forced_race_is_refused_where_the_store_cannot_hold_its_racers():
    # Nothing would hold the racers between read and write: the race would run free, and the
    # entry would be judged as a schedule it never had.
    caps = ReferenceAdapter().capabilities(None)
    forced = Race("t0", values=("a", "a"), forced=True)
    assert inexpressible(forced, caps) is None
    assert "forced_race=False" in inexpressible(forced, replace(caps, forced_race=False))
    assert inexpressible(replace(forced, forced=False), replace(caps, forced_race=False)) is None


def test_retire_removes_an_na_entry_and_its_report_and_nothing_else(tmp_path, monkeypatch):
    # `replay --retire`: an entry recorded before the n/a declaration accuses the framework of
    # breaking what it does not offer; it goes, with its report.  An expressible one stays.
    import fuzz.replay
    from fuzz.cli import main
    from fuzz.report import report_path
    from fuzz.trace import Finding, dump_trace

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(fuzz.replay, "resolve_registered", lambda name: NoForkReference())
    finding = Finding("ForkIgnore", "FD", 1, "fork with 'a' at gate 1 never consumed it")
    na = trace().with_(finding=finding, status="FAILED", fingerprint="aa11")
    kept = Trace(Workflow(n=1, gates=(1,), values=("a", "b")), (Start("t0"),),
                 finding=Finding("Replay", "EO", 0, "x"), status="FAILED", fingerprint="bb22")
    paths = []
    for t in (na, kept):
        path = tmp_path / "corpus" / "reference" / "default" / f"{t.finding.category}-{t.fingerprint}.json"
        dump_trace(t, path)
        report = report_path(t)
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text("report")
        paths.append((path, report))
    main(["replay", "--retire", str(tmp_path / "corpus")])
    (na_path, na_report), (kept_path, kept_report) = paths
    assert not na_path.exists() and not na_report.exists()
    assert kept_path.exists() and kept_report.exists()
