"""Replay corpus entries on their targets: FIXED, FAILED, CHANGED or ERROR.

- ``FIXED``: no divergence any more (the framework changed, or the entry was a mutant's and now
  runs on the reference);
- ``FAILED``: the first divergence has the entry's category still;
- ``CHANGED``: a divergence of another category;
- ``ERROR``: the entry could not be replayed (malformed file, unknown target or variant, a
  framework that is not installed, an operation the model does not admit, or one the variant
  now declares n/a: an entry recorded before that declaration tests an idiom the framework does
  not have, and is not run); the reason says which.

Replay drives the same worker, barrier and ledger machinery as a campaign, and judges with the
campaign's own comparison step (``judge.judge_trace``): the adapter's tamper reach and documented
deviations apply, and where the contract allows several outcomes the target's branch is followed.
``summarize`` folds several trials of one entry (``replay --trials``) into one result with the
rate of each status.

A corpus file is inert data: its ``target`` must name a registered target (``fuzz.targets``).
A dotted path (``mod:Class``) in a file is refused, never imported, unless the user named that
same target on the command line (``--target``); likewise a store factory (``--store``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from refmodel import InvalidOperation

from .errors import ResumefuzzError, UsageError
from .judge import judge_trace
from .minimize import inexpressible, shape_inexpressible
from .runner import Session, Settings
from .targets import (
    prepare_store,
    resolve,
    resolve_registered,
    select_variants,
    use_store,
)
from .trace import load_trace


@dataclass
class ReplayResult:
    path: str
    status: str
    recorded: str | None  # the category the entry was recorded with
    category: str | None  # the category found now (None when nothing diverged)
    detail: str
    verdict: str | None = None  # "✗" or "D" for the divergence found now
    # The index of the operation that diverged now (0-based, as ``finding.step``), or None: a
    # replay that diverged before the recorded step never reached the recorded finding.
    step: int | None = None
    rates: dict = field(default_factory=dict)  # status -> trials with it (``summarize``)
    # ERROR because an operation of the entry is one the variant now declares n/a: the reason
    # (``Capabilities.not_expressible``).  Such an entry judges what the framework does not
    # offer; ``replay --retire`` removes it.
    na: str = ""
    # The whole judgement of this replay (``judge.TraceVerdict``; None when it could not run):
    # what ``relabelled`` rewrites a CHANGED entry from.  Not part of the JSON output.
    judged: object = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "judged"}


STATUSES = ("FAILED", "CHANGED", "FIXED", "ERROR")


class Replayer:
    """Prepares each target once, then replays entries on it."""

    def __init__(self, op_timeout: float = 30.0, target: str | None = None, adapters=None,
                 store: str | None = None, deadline: float | None = None,
                 collect_garbage: bool = False):
        self._adapters: dict = dict(adapters or {})  # name -> an adapter prepared already
        self.op_timeout = op_timeout
        self.target = target  # replay on this target instead of the entry's own
        self.store = store  # --store: the factory path, from the command line only
        self.deadline = deadline  # time.monotonic() to stop by (raises OutOfTime), or None
        self.collect_garbage = collect_garbage  # ``Settings.collect_garbage``

    def _adapter(self, name: str):
        if name not in self._adapters:
            # The user's own --target may be any adapter; a name read from a file must be one
            # of the registry's: a file never names code to import.
            adapter = resolve(name) if name == self.target else resolve_registered(name)
            use_store(adapter, self.store)
            self._adapters[name] = prepare_store(adapter)
        return self._adapters[name]

    def replay(self, path: Path) -> ReplayResult:
        recorded = None
        try:
            trace = load_trace(path)
            recorded = trace.finding.category if trace.finding else None
            return self.replay_trace(trace, str(path))
        except (ResumefuzzError, InvalidOperation) as exc:
            return ReplayResult(str(path), "ERROR", recorded, None, str(exc))

    def replay_trace(self, trace, path: str = "<trace>") -> ReplayResult:
        recorded = trace.finding.category if trace.finding else None
        try:
            recorded_store = trace.versions.get("store-factory")
            if recorded_store and self.store is None:
                # A corpus entry is inert data: it names the factory, it never imports it.
                raise UsageError(f"entry ran on the store factory {recorded_store!r}: replay it "
                                 f"with --store {recorded_store} (after checking that module)")
            adapter = self._adapter(self.target or trace.target)
            # Another target replays the entry's variant when it has one of that name (a
            # third-party adapter passed by dotted path), else its first variant.
            own = self.target is None or trace.variant in {v.name for v in adapter.variants()}
            variants = select_variants(adapter, [trace.variant] if own else None)
            settings = Settings(op_timeout=self.op_timeout, deadline=self.deadline,
                                collect_garbage=self.collect_garbage)
            with Session(adapter, variants[0], settings=settings) as session:
                return self._run(path, trace, session, recorded)
        except (ResumefuzzError, InvalidOperation) as exc:
            return ReplayResult(path, "ERROR", recorded, None, str(exc))

    def _run(self, path, trace, session, recorded) -> ReplayResult:
        # The campaign's own comparison step: the same tamper reach, the same deviations, and
        # the target's allowed branch followed exactly as the machine follows it.
        adapter, variant = session.adapter, session.variant
        caps = adapter.capabilities(variant)
        why = shape_inexpressible(trace.workflow, caps)
        if why:
            return ReplayResult(str(path), "ERROR", recorded, None,
                                f"the workflow's shape is n/a on this variant: {why}", na=why)
        for i, op in enumerate(trace.operations):
            why = inexpressible(op, caps)
            if why:
                return ReplayResult(str(path), "ERROR", recorded, None,
                                    f"step {i + 1} ({op.name}) is n/a on this variant: {why}",
                                    na=why)
        verdict = judge_trace(session.case, trace.workflow, trace.operations,
                              caps, list(adapter.deviations(variant)))
        divergence = verdict.divergence
        if divergence is None:
            return ReplayResult(str(path), "FIXED", recorded, None,
                                f"all {len(trace.operations)} operations match the reference",
                                judged=verdict)
        status = "FAILED" if divergence.category == recorded else "CHANGED"
        op = trace.operations[verdict.first_divergence_index]
        detail = f"step {verdict.first_divergence_index + 1} ({op.name}): {divergence.detail}"
        if verdict.verdict == "D":
            detail += f" [D: {verdict.citation}]"
        return ReplayResult(str(path), status, recorded, divergence.category, detail,
                            verdict=verdict.verdict, step=verdict.first_divergence_index,
                            judged=verdict)


def relabelled(trace, trials: list[ReplayResult]):
    """The entry re-judged under the category its replays find now (``replay --relabel``), or
    ``None`` when no trial came back CHANGED.

    The category is the one most trials changed to (a tie: the first seen).  The new entry keeps
    the operations up to that divergence, records what the target observed and the reference's
    canonical outcome for each, the new finding (its rate ``reproduced`` when not every trial
    showed it), status ``FAILED``, and a fingerprint of its own; its reproduction script is gone
    (the old one checked the old finding: ``resumefuzz report`` writes a new one).
    """
    from collections import Counter

    from refmodel import CATEGORY_INFO

    from .corpus import fingerprint
    from .rate import Rate
    from .trace import Finding

    changed = [t for t in trials if t.status == "CHANGED" and t.judged is not None]
    if not changed:
        return None
    counts = Counter(t.category for t in changed)
    category = max(counts, key=lambda c: counts[c])  # first seen among equals
    judged = next(t for t in changed if t.category == category).judged
    i, k, n = judged.first_divergence_index, counts[category], len(trials)
    finding = Finding(category, CATEGORY_INFO[category].breaks, i, judged.divergence.detail,
                      judged.verdict, judged.citation, owner=judged.owner,
                      reproduced=None if k == n else Rate(k, n))
    new = trace.with_(operations=tuple(trace.operations[: i + 1]),
                      observations=tuple(judged.observations[: i + 1]),
                      expected=tuple(a[0] for a in judged.expected[: i + 1]),
                      finding=finding, status="FAILED")
    return new.with_(fingerprint=fingerprint(category, new))


def with_verdict(trace, trials):
    """``trace`` with the verdict (and citation) its finding got in ``trials``, when the entry is
    FAILED and every trial that showed the finding judged it alike; else ``trace`` itself.  A
    documented deviation declared or narrowed since the entry was recorded turns its ✗ into a D,
    or its D into a ✗: ``replay --update`` and the nightly run record it, as they record the
    status, so no entry keeps a verdict its citation no longer gives."""
    judged = {(t.verdict, t.judged.citation, t.judged.owner) if t.judged is not None
              else (t.verdict, "", "framework") for t in trials if t.status == "FAILED"}
    if (trace.status or "FAILED") != "FAILED" or trace.finding is None or len(judged) != 1:
        return trace
    ((verdict, citation, owner),) = judged
    f = trace.finding
    if verdict is None or (verdict, citation, owner) == (f.verdict, f.citation, f.owner):
        return trace
    return trace.with_(finding=replace(f, verdict=verdict, citation=citation, owner=owner))


def updated(trace, trials):
    """The entry as replay ``trials`` that reached its finding (``reached``) leave it, the one rule
    ``replay --update`` and the nightly run both record by: the status of ``summarize``, unless
    the recorded one still comes up in a trial (a timing-dependent finding stays FAILED while it
    comes up at all), except that a FIXED entry whose finding came back in any trial is FAILED
    again (a finding that came back k of n > 0 times is a finding); then the verdict
    (``with_verdict``).  ``trace`` itself when nothing changes."""
    statuses = [t.status for t in trials]
    status, recorded = summarize(trials).status, trace.status or "FAILED"
    new = trace
    if status != recorded and (recorded not in statuses or (recorded, status) == ("FIXED", "FAILED")):
        new = new.with_(status=status)
    return with_verdict(new, trials)


def reached(trace, status: str, step: int | None) -> bool:
    """Does a replay that ended with ``status``, diverging at ``step``, say anything about the
    entry ``trace``'s finding?  Not when it could not be judged (``ERROR``), nor when it diverged
    at an earlier step than the recorded one (``CHANGED`` there): the run never got to the
    finding, taken elsewhere first by some other, timing-dependent behaviour (CrewAI's
    checkpoint writes racing each other).  ``replay --update`` records nothing from such a
    replay, and the corpus regression test runs another in its place."""
    if status == "ERROR":
        return False
    recorded = trace.finding.step if trace.finding else None
    return not (status == "CHANGED" and recorded is not None and step is not None
                and step < recorded)


def summarize(trials: list[ReplayResult]) -> ReplayResult:
    """One entry's result over several trials, with the rate of each status.

    FAILED if any trial failed (a finding that came back k of n times is a finding); else CHANGED
    if any trial changed; FIXED only when every trial was FIXED; else ERROR (the entry could not
    be replayed, or some trials could not run and the rest were FIXED: nothing then shows that
    it is fixed).  A tie never turns a failing entry into FIXED.
    """
    if not trials:
        raise ValueError("summarize needs at least one trial")
    statuses = [t.status for t in trials]
    n = len(statuses)
    rates = {s: statuses.count(s) for s in STATUSES if s in statuses}
    if "FAILED" in rates:
        status = "FAILED"
    elif "CHANGED" in rates:
        status = "CHANGED"
    elif rates.get("FIXED") == n:
        status = "FIXED"
    else:  # every trial, or some, could not run: nothing shows the entry is fixed
        status = "ERROR"
    chosen = next(t for t in trials if t.status == status)
    result = replace(chosen, rates=rates)
    if n > 1:
        counts = ", ".join(f"{s} {c}/{n}" for s, c in rates.items())
        result.detail = f"[{counts}] {chosen.detail}"
    return result
