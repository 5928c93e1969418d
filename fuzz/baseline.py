"""Yours or the framework's: a finding on a store under test (``--store``), replayed on the store
the framework ships.

A store author runs resumefuzz to learn about *their* store, and the framework under it has
defects of its own (LangGraph loses a race with its own ``SqliteSaver`` too).  Every finding on a
``store-<name>-...`` variant is therefore replayed, up to ``TRIALS`` times, on the variant the
adapter names as its comparison (``Adapter.baseline_variant``: the same API style and spellings
over the framework's built-in store).  Shown there too, it is the framework's (``owner``
``"framework"``); not shown in any trial, it is the store's (``"store"``).  The command line and
the pytest embedding (``resumefuzz.pytest``) decide with this one function, so a store author
gets the same answer from both.

A replay that cannot run on the built-in store (a tool error there) decides nothing: the finding
stays the store's, and the note says the comparison did not run, never that the framework is
clean.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from refmodel import CATEGORY_INFO
from refmodel.classify import STALE_READ

from .internal.blame import STORE_FRAME

from .minimize import timing_dependent
from .replay import Replayer
from .targets import prepare, resolve

TRIALS = 3  # replays on the built-in store before a finding is called the store's


@dataclass(frozen=True)
class Ownership:
    """Whose a store finding is: ``owner`` "store" or "framework"; ``note`` says why, for the
    summary line and the report (the built-in variant and what it showed)."""

    owner: str
    note: str
    baseline: str | None = None  # the built-in variant compared with (None: there is none)


class Baseline:
    """The built-in comparison for one adapter under ``use_store`` (prepared on first use)."""

    def __init__(self, adapter, op_timeout: float, deadline: float | None = None):
        self.adapter = adapter
        self.op_timeout = op_timeout
        self.deadline = deadline
        self._replayer = None

    def variant_for(self, variant_name: str) -> str | None:
        """The built-in variant the store variant ``variant_name`` is compared with, or None."""
        chosen = next((v for v in self.adapter.variants() if v.name == variant_name), None)
        # getattr: an adapter may implement the protocol's methods without subclassing it.
        compare = getattr(self.adapter, "baseline_variant", None)
        return None if chosen is None or compare is None else compare(chosen)

    def judge(self, trace) -> Ownership:
        """Whose ``trace``'s finding is (a ✗ or D found on the store under test)."""
        name = self.variant_for(trace.variant)
        if name is None:
            return Ownership("store", "no variant of the framework's own store to compare with")
        again = trace.with_(variant=name, versions={})
        errors = []
        for _ in range(TRIALS):
            result = self.replayer().replay_trace(again)
            shown = same_defect(trace, result)
            if shown is not None:
                return Ownership("framework", f"shown on the framework's own {name} too{shown}",
                                 name)
            if result.status == "ERROR":
                errors.append(result.detail)
        if len(errors) == TRIALS:
            return Ownership("store", f"the comparison on the framework's own {name} did not "
                             f"run (a tool error: {errors[0]}); not known to be the framework's",
                             name)
        return Ownership("store", f"not shown on the framework's own {name} in {TRIALS} "
                         "replays", name)

    def own(self, trace):
        """``(trace, ownership)``: ``trace`` with ``finding.owner`` decided by ``judge`` and a
        note for its report (whose, why, and for the store's, the store methods the adapter
        says the finding implicates: ``Adapter.store_methods``).  A D is the framework's
        documented weakening, and a variant with no built-in comparison decides nothing: both
        come back as they are, with ``ownership`` None."""
        finding = trace.finding
        if finding.verdict == "D" or self.variant_for(trace.variant) is None:
            return trace, None
        ownership = self.judge(trace)
        note = f"Whose: the {ownership.owner}'s ({ownership.note})."
        if ownership.owner == "store":
            variant = next(v for v in self.adapter.variants() if v.name == trace.variant)
            methods = getattr(self.adapter, "store_methods", None)
            where = where_to_look(methods(variant) if methods else {}, finding.category,
                                  finding.detail)
            if where:
                note += f" Where to look in the store: {where}."
        finding = replace(finding, owner=ownership.owner,
                          note=" ".join(filter(None, (finding.note, note))))
        return trace.with_(finding=finding), ownership

    def replayer(self) -> Replayer:
        if self._replayer is None:
            plain = prepare(resolve(self.adapter.name))
            self._replayer = Replayer(self.op_timeout, adapters={plain.name: plain},
                                      deadline=self.deadline)
        return self._replayer


def where_to_look(methods, category: str, detail: str) -> str:
    """The entry of an adapter's ``store_methods`` table a store finding points at: none when
    the store's own error names the method that raised (``[in MySaver.get_tuple]``), the
    ``"stale-read"`` entry for a stale read, else the category's."""
    if STORE_FRAME in detail:
        return ""
    return methods.get("stale-read" if STALE_READ in detail else category, "")


def same_defect(trace, result) -> str | None:
    """Whether a replay ``result`` of ``trace`` on the built-in store shows its defect: ``""``
    (the same category), a note (a free race: the same property broken at the same step, under
    the category that interleaving gives), or None.  A free race decides by timing which racer
    does what: in ``docs/examples/test_my_saver.py`` one interleaving on the store made a
    DoubleConsume (CO) of what the built-in saver shows 12 of 12 times as a LostUpdate (CO), and
    the store was blamed for it."""
    if result.status == "FAILED":
        return ""
    finding = trace.finding
    if (result.status == "CHANGED" and timing_dependent(trace) and finding is not None
            and result.step == finding.step and result.category in CATEGORY_INFO
            and CATEGORY_INFO[result.category].breaks == finding.property):
        return f" (as {result.category}: a free race decides which)"
    return None
