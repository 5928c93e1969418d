"""Helpers for adapter authors' tests: drive a ``Case`` in this process, as a worker would.

``InProcessCase(adapter, variant, workflow, tmp_path).run(op)`` applies one executing operation
with the engine's own hooks and ledger and returns ``(outcome, effect rows, exception)``, the
outcome named as the engine names it.  Exception-kind crash points only: SIGKILL, races and twins
need worker processes (``fuzz.runner.Session``).  ``run_cases(session, workflow, ops, n)`` runs
the same operations as ``n`` cases of a ``Session`` in turn, to check ``Tuning.reuse_worker``.
"""

from __future__ import annotations

import re
from pathlib import Path

from .internal.hooks import EngineHooks
from .internal.ledger import Ledger
from .internal.worker import injected

__all__ = ["InProcessCase", "allowed_resume_trace", "check_standalone", "defect_entries",
           "injected", "run_cases"]


class InProcessCase:
    def __init__(self, adapter, variant, workflow, tmp: Path):
        self.adapter, self.variant, self.workflow = adapter, variant, workflow
        self.workdir = Path(tmp) / "case"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ledger = Ledger(Path(tmp) / "ledger.sqlite")
        self.case = adapter.open(variant, workflow, self.workdir)
        self.seq = 0

    def run(self, op):
        """``(outcome, effect rows of this op, exception or None)``."""
        self.seq += 1
        branch = getattr(op, "new_thread", "") or op.thread
        hooks = EngineHooks(op, seq=self.seq, branch=branch, ledger=self.ledger)
        error = None
        try:
            outcome = self.case.run(op, hooks)
            hooks.run_returned()
        except Exception as exc:  # noqa: BLE001 - the outcome is what a test looks at
            error = exc
            outcome = "crashed" if injected(exc) else "rejected"
        rows = self.ledger.rows(self.seq)
        assert hooks.fired == len(rows), "the hooks' counter and the ledger disagree"
        return outcome, rows, error

    def reopen(self):
        """A fresh case on the same workdir, as a replacement worker would open it."""
        self.case.close()
        self.case = self.adapter.open(self.variant, self.workflow, self.workdir)
        return self.case

    def close(self) -> None:
        self.case.close()
        self.ledger.close()


def run_cases(session, workflow, ops, n: int) -> tuple[list, list]:
    """Apply ``ops`` as ``n`` cases of ``session`` (a ``fuzz.runner.Session``), one after the
    other: each case's worker pid and its observations.  A variant that declares
    ``Tuning.reuse_worker`` should show one pid, ``session.left_behind == 0`` (no case
    left a thread or a file behind) and the observations of ``Settings(reuse=False)``."""
    pids, seen = [], []
    for _ in range(n):
        runner = session.case(workflow)
        try:
            seen.append([runner.apply(op) for op in ops])
            pids.append(runner.worker.pid)
        finally:
            runner.close()
    return pids, seen


def allowed_resume_trace(trace):
    """``trace`` (any entry of the variant under test) rewritten to ``start``, ``resume('a')``
    on a one-gate workflow, recorded as if the resume had fired nothing: what the framework
    really does (task 1 fires with 'a') is what the contract allows, so a reproduction script
    composed for it must exit 0.  The reproduction tests of every adapter share it."""
    from dataclasses import replace

    from refmodel import Observation, Resume, Start, StateView, Workflow

    wf = Workflow(1, {1}, ("a", "b"))
    start = Observation("interrupted", (), StateView.of(wf, [], {}, 1))
    wrong = Observation("completed", (), StateView.of(wf, [1], {1: "a"}, None))
    return trace.with_(workflow=wf, operations=(Start("t0"), Resume("t0", value="a")),
                       observations=(start, wrong),
                       finding=replace(trace.finding, category="Unclassified", step=1))


def defect_entries(corpus: Path, op: str) -> list[Path]:
    """The entries under ``corpus`` recorded FAILED whose finding is at an ``op`` operation,
    ✗ first, then D (a documented or caller-owned deviation still diverges, and its script
    exits 1 when it shows), by path: the reproduction tests of every adapter pick their witness
    of a kind of operation here, not by fingerprint (the minimizer may rewrite entries, and a
    verdict moves between ✗ and D as deviations are declared)."""
    from .trace import load_trace

    out = []
    for path in sorted(Path(corpus).rglob("*.json")):
        trace = load_trace(path)
        if (trace.status == "FAILED" and trace.finding is not None
                and trace.operations[trace.finding.step].name == op):
            out.append((trace.finding.verdict != "✗", path))
    return [path for _, path in sorted(out)]


# Our vocabulary, which a reproduction script must not carry below its docstring: thread ids,
# words of the engine.  Each adapter's test adds its own (its case's internal names).
HARNESS_WORDS = ("'t0'", "'f1'", "tip", "after_commit", "before_effect", "in_flight")


def check_standalone(script: str, also=(), *, as_words: bool = False) -> None:
    """Assert that ``script`` is standalone and in the framework's terms: below its docstring
    none of ``HARNESS_WORDS`` or ``also`` (as substrings, or as whole words with ``as_words``:
    "multiprocessing" holds "tip"), and no import of resumefuzz's packages or of Hypothesis."""
    body = script.split('"""', 2)[2]
    for word in (*HARNESS_WORDS, *also):
        if as_words:
            assert not re.search(rf"(?<!\w){re.escape(word)}(?!\w)", body), word
        else:
            assert word not in body, word
    for module in ("refmodel", "fuzz", "adapters", "resumefuzz", "hypothesis"):
        assert f"import {module}" not in script and f"from {module}" not in script
