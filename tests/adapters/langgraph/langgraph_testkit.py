"""Helpers for the LangGraph adapter's machinery tests (a unique module name: pytest puts every
test directory on sys.path, and other adapters have test helpers of their own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from adapters.protocol import CrashInjected, Fork
from fuzz.internal.hooks import EngineHooks

ROOT = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("langgraph_worker.py")


def branch_of(op) -> str:
    return op.new_thread if isinstance(op, Fork) else op.thread


def run_op(case, op, seq: int, ledger):
    """Run one executing op in process, as the engine would: ``(outcome, rows, hooks)``."""
    hooks = EngineHooks(op, seq=seq, branch=branch_of(op), ledger=ledger)
    try:
        outcome = case.run(op, hooks)
        hooks.run_returned()
    except Exception as exc:  # noqa: BLE001 - classify as the engine does
        outcome = "crashed" if _chain_has(exc, CrashInjected) else "rejected"
    return outcome, ledger.rows(seq), hooks


def _chain_has(exc, kind) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kind):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def spawn(job: dict, pass_fds=()) -> subprocess.Popen:
    """Run one op in a fresh interpreter (``langgraph_worker.py``), as a killed or racing
    engine worker would: its own process, its own connection to the store."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONHASHSEED="0")
    return subprocess.Popen([sys.executable, str(WORKER), json.dumps(job)], env=env,
                            pass_fds=pass_fds, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
