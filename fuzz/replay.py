"""Replay corpus entries on their targets: FIXED, FAILED, CHANGED or ERROR.

- ``FIXED``: no divergence any more (the framework changed, or the entry was a mutant's and now
  runs on the reference);
- ``FAILED``: the first divergence has the entry's category still;
- ``CHANGED``: a divergence of another category;
- ``ERROR``: the entry could not be replayed (malformed file, unknown target or variant, a
  framework that is not installed, an operation the model does not admit); the reason says which.

Replay drives the same worker, barrier and ledger machinery as a campaign, and judges with the
campaign's own comparison step (``judge.judge_trace``): the adapter's tamper reach and documented
deviations apply, and where the contract allows several outcomes the target's branch is followed.
``summarize`` folds several trials of one entry (``replay --trials``) into one result with the
rate of each status.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from refmodel import InvalidOperation

from .errors import ResumefuzzError
from .judge import judge_trace
from .runner import Session, Settings
from .targets import prepare, resolve, select_variants
from .trace import load_trace


@dataclass
class ReplayResult:
    path: str
    status: str
    recorded: str | None  # the category the entry was recorded with
    category: str | None  # the category found now (None when nothing diverged)
    detail: str
    verdict: str | None = None  # "✗" or "D" for the divergence found now
    rates: dict = field(default_factory=dict)  # status -> trials with it (``summarize``)

    def to_json(self) -> dict:
        return dict(self.__dict__)


STATUSES = ("FAILED", "CHANGED", "FIXED", "ERROR")


class Replayer:
    """Prepares each target once, then replays entries on it."""

    def __init__(self, op_timeout: float = 30.0, target: str | None = None, adapters=None):
        self._adapters: dict = dict(adapters or {})  # name -> an adapter prepared already
        self.op_timeout = op_timeout
        self.target = target  # replay on this target instead of the entry's own

    def _adapter(self, name: str):
        if name not in self._adapters:
            self._adapters[name] = prepare(resolve(name))
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
            adapter = self._adapter(self.target or trace.target)
            variant = trace.variant if self.target is None else None
            variants = select_variants(adapter, [variant] if variant else None)
            session = Session(adapter, variants[0], settings=Settings(op_timeout=self.op_timeout))
            return self._run(path, trace, session, recorded)
        except (ResumefuzzError, InvalidOperation) as exc:
            return ReplayResult(path, "ERROR", recorded, None, str(exc))

    def _run(self, path, trace, session, recorded) -> ReplayResult:
        # The campaign's own comparison step: the same tamper reach, the same deviations, and
        # the target's allowed branch followed exactly as the machine follows it.
        adapter, variant = session.adapter, session.variant
        verdict = judge_trace(session.case, trace.workflow, trace.operations,
                              adapter.capabilities(variant), list(adapter.deviations(variant)))
        divergence = verdict.divergence
        if divergence is None:
            return ReplayResult(str(path), "FIXED", recorded, None,
                                f"all {len(trace.operations)} operations match the reference")
        status = "FAILED" if divergence.category == recorded else "CHANGED"
        op = trace.operations[verdict.first_divergence_index]
        detail = f"step {verdict.first_divergence_index + 1} ({op.name}): {divergence.detail}"
        if verdict.verdict == "D":
            detail += f" [D: {verdict.citation}]"
        return ReplayResult(str(path), status, recorded, divergence.category, detail,
                            verdict=verdict.verdict)


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
