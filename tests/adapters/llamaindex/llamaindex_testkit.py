"""Shared helpers of the LlamaIndex adapter tests: the workflow, variant lists, an in-process
driver using the engine's hooks and ledger (exception crashes only)."""

from __future__ import annotations

from pathlib import Path

from adapters.protocol import Workflow
from fuzz.internal.hooks import EngineHooks
from fuzz.internal.ledger import Ledger

WORKFLOW = Workflow(4, {2, 3}, ("a", "b"))
CORE = ["core-wait-idle", "core-wait-step", "core-event-idle", "core-event-step"]
SERVER = ["server-wait", "server-event"]
IN_PROCESS = CORE + SERVER  # DBOS starts threads: it runs in workers only (test_llamaindex_engine)

class Driver:
    """Applies ops in this process with the engine's hooks and ledger."""

    def __init__(self, adapter, variant, tmp: Path, workflow=WORKFLOW):
        self.adapter, self.variant, self.workflow = adapter, variant, workflow
        self.workdir = tmp / "case"
        self.workdir.mkdir()
        self.ledger = Ledger(tmp / "ledger.sqlite")
        self.case = adapter.open(variant, workflow, self.workdir)
        self.seq = 0

    def run(self, op):
        """``(outcome, effect rows, exception)``, the outcome as the engine names it."""
        from fuzz.internal.worker import injected as _injected

        self.seq += 1
        branch = getattr(op, "new_thread", "") or op.thread
        hooks = EngineHooks(op, seq=self.seq, branch=branch, ledger=self.ledger)
        error = None
        try:
            outcome = self.case.run(op, hooks)
            hooks.run_returned()
        except Exception as exc:  # noqa: BLE001 - the outcome is what we look at
            error = exc
            outcome = "crashed" if _injected(exc) else "rejected"
        assert hooks.fired == len(self.ledger.rows(self.seq))  # counter and ledger agree
        return outcome, self.ledger.rows(self.seq), error

    def reopen(self):
        """A fresh case on the same workdir, as a replacement worker would open it."""
        self.case.close()
        self.case = self.adapter.open(self.variant, self.workflow, self.workdir)
        return self.case

    def close(self):
        self.case.close()
        self.ledger.close()
