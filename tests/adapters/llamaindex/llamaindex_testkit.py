"""Shared helpers of the LlamaIndex adapter tests: the workflow, variant lists, an in-process
driver using the engine's hooks and ledger (exception crashes only)."""

from __future__ import annotations

from pathlib import Path

from adapters.protocol import Workflow
from fuzz.testing import InProcessCase

WORKFLOW = Workflow(4, {2, 3}, ("a", "b"))
CORE = ["core-wait-idle", "core-wait-step", "core-event-idle", "core-event-step"]
# The in-process server variants; the HTTP ones (the worker serves uvicorn) have tests of their own
# (test_llamaindex_http.py): many uvicorn servers on many loops in one pytest process hung a
# resume there, cause not found (see the issue 13 report).
SERVER = ["server-wait-private", "server-event-private"]
HTTP = ["server-wait", "server-event"]
IN_PROCESS = CORE + SERVER  # DBOS starts threads: it runs in workers only (test_llamaindex_engine)

class Driver(InProcessCase):
    """Applies ops in this process with the engine's hooks and ledger."""

    def __init__(self, adapter, variant, tmp: Path, workflow=WORKFLOW):
        super().__init__(adapter, variant, workflow, tmp)

