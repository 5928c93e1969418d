"""Helpers for the LangGraph adapter's machinery tests (a unique module name: pytest puts every
test directory on sys.path, and other adapters have test helpers of their own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from adapters.protocol import CrashInjected, Fork, Resume
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


def job(v, workflow, workdir, ledger, op, seq, **extra) -> dict:
    """What ``langgraph_worker.py`` runs: one op of variant ``v`` on the case in ``workdir``."""
    return {"variant": v.name, "workflow": workflow.to_json(), "workdir": str(workdir),
            "ledger": str(ledger.path), "op": op.to_json(), "seq": seq, **extra}


def forced_race(v, workflow, workdir, ledger, seq, values) -> list[dict]:
    """One racer process per value of ``values`` resumes gate 2 of t0: each reads the
    interrupted checkpoint and waits; once all have read (nobody has consumed yet), all go.
    Returns each racer's reply (``outcome``, ``pid``, ...)."""
    k = len(values)
    ready_r, ready_w = os.pipe()
    gos = [os.pipe() for _ in range(k)]
    procs = []
    for i, ((go_r, _), value) in enumerate(zip(gos, values)):
        op = Resume("t0", value=value, gate=2)
        procs.append(spawn(job(v, workflow, workdir, ledger, op, seq, racer=i + 1,
                               ready_fd=ready_w, go_fd=go_r), pass_fds=(ready_w, go_r)))
    os.close(ready_w)
    got = b""
    while len(got) < k:
        chunk = os.read(ready_r, k)
        assert chunk, "a racer exited before reading: " + procs[0].stderr.read()[-2000:]
        got += chunk
    os.close(ready_r)
    assert ledger.rows(seq) == []  # everyone has read; nobody has consumed yet
    for go_r, go_w in gos:
        os.write(go_w, b"g")
        os.close(go_w)
        os.close(go_r)
    replies = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
        replies.append(eval(out.strip().splitlines()[-1].replace("null", "None")))
    return replies
