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
