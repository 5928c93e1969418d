"""The worker side of the runner: the loop a forked (or spawned) worker serves commands with.

Commands arrive over the worker's pipe: ``run`` (an executing operation), ``query``, ``tamper``,
``clone``, ``race`` (one racer's resume, between start and read barriers) and ``close``.  A
``sigkill`` crash point sends ``("barrier",)`` and waits for an answer that never comes: the
parent kills the worker.  Every exception from the adapter is an observation, never a crash of
the worker.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from adapters.protocol import CrashInjected, Unreadable
from refmodel import op_from_json

from ..errors import EngineError
from .hooks import EngineHooks
from .ledger import Ledger

TWIN = "~twin"  # the branch label suffix of a twin copy's effects


def serve(conn, adapter, variant, workflow, workdir, ledger_path, fresh=False):
    """The worker's loop: open the case, then serve commands until told to close.

    ``fresh``: a spawned interpreter, which must set the environment and import the framework
    itself (a forked worker inherits both from the parent)."""
    if fresh:
        from ..targets import prepare

        prepare(adapter)
    ledger = Ledger(ledger_path)
    case = adapter.open(variant, workflow, Path(workdir))

    def barrier():
        conn.send(("barrier",))
        conn.recv()  # nothing ever comes: the parent kills this process

    try:
        while True:
            message = conn.recv()
            kind = message[0]
            if kind == "close":
                break
            if kind == "race":
                _, op_doc, seq, branch, racer, forced = message
                conn.send(("opened",))
                conn.recv()  # go

                def ready():
                    conn.send(("read",))
                    conn.recv()

                conn.send(_run_op(case, op_from_json(op_doc), seq, branch, ledger, barrier,
                                  racer, ready if forced else None))
                break
            conn.send(handle(case, ledger, message, barrier))
    finally:
        try:
            case.close()
        finally:
            ledger.close()


def handle(case, ledger, message, barrier=None):
    """One command of a case: ``run``, ``query``, ``tamper`` or ``clone``; returns the reply."""
    kind = message[0]
    if kind == "run":
        _, op_doc, seq, branch, racer = message
        return _run_op(case, op_from_json(op_doc), seq, branch, ledger, barrier, racer)
    if kind == "query":
        return _guarded(lambda: case.query(message[1]).to_json())
    if kind == "tamper":
        return _guarded(lambda: case.tamper(message[1], message[2]))
    if kind == "clone":
        return _guarded(lambda: case.clone_store(Path(message[1])))
    raise EngineError(f"unknown worker command {kind!r}")


def _run_op(case, op, seq, branch, ledger, barrier, racer, ready=None):
    hooks = EngineHooks(op, seq=seq, branch=branch, ledger=ledger, barrier=barrier, racer=racer,
                        race_ready=ready)
    try:
        outcome = case.run(op, hooks)
        hooks.run_returned()
    except BaseException as exc:  # noqa: BLE001 - every exception is an observation
        if injected(exc):
            return ("crashed", "crashed", hooks.fired)
        hooks.race_ready()  # a racer refused before reading still releases the others (once)
        return ("rejected", f"{type(exc).__name__}: {exc}"[:500], hooks.fired)
    hooks.race_ready()  # the adapter never called it (a no-op resume): release the others
    if outcome not in ("interrupted", "completed"):
        return ("rejected", f"Case.run returned {outcome!r}", hooks.fired)
    return ("ok", outcome, hooks.fired)


def injected(exc: BaseException) -> bool:
    """Was a ``CrashInjected`` anywhere in the chain (causes, contexts, groups) of ``exc``?"""
    seen = set()
    stack = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, CrashInjected):
            return True
        stack += [e.__cause__, e.__context__]
        stack += list(getattr(e, "exceptions", ()))
    return False


def _guarded(call):
    try:
        return ("ok", call())
    except Unreadable as exc:
        return ("error", f"unreadable: {exc}")
    except Exception as exc:  # noqa: BLE001 - reported, not raised, so the worker lives on
        return ("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"[:1000])


def cleanup(adapter, variant, workdir):
    adapter.cleanup(variant, Path(workdir))
