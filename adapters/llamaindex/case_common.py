"""What every LlamaIndex case shares: the event loop a case keeps, and how a failed run is
reported (``open_case`` in ``case.py`` picks the case class)."""

from __future__ import annotations

import asyncio

from adapters.protocol import CrashInjected, Refused, Resume, StaleResume


def close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left on a case's loop and close it (runs that were paused stay paused in
    the store: the framework persisted them before reporting the pause)."""
    if loop.is_closed():
        return
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


class RecordedFailure(Refused):
    """The framework reported a failure recorded by an earlier operation (for instance DBOS
    replaying a step's stored exception): a refusal of this operation, not a crash in it.  A
    ``Refused``, so the engine records it as the framework's (``rejected`` with these words),
    never as a tool error: the framework raised it, the adapter only strips the earlier
    operation's injected crash from its chain."""


def crash_in_chain(exc: BaseException) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, CrashInjected):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def failure(exc: BaseException, slot) -> BaseException:
    """What a case raises for a failed run: the crash this operation injected if one fired
    (so the engine sees ``crashed``); otherwise, when the framework hands back an *earlier*
    operation's ``CrashInjected``, a ``RecordedFailure`` carrying no chain (``rejected``)."""
    if slot.crash is not None:
        if slot.crash is not exc:
            slot.crash.__cause__ = exc
        return slot.crash
    if crash_in_chain(exc):
        plain = RecordedFailure(f"{type(exc).__name__}: {exc}")
        plain.__cause__ = plain.__context__ = None
        plain.__suppress_context__ = True
        return plain
    return exc


def as_retried_answer(op):
    """A ``StaleResume`` on a server or DBOS handler: the handle is the handler id and the
    question its event stream showed (``Ans<gate>``), so answering through it is the same call
    as answering the question then, repeated (a retried ``POST /events/{handler_id}``): a
    ``Resume`` naming that gate.  Any other op is returned as it is."""
    if isinstance(op, StaleResume):
        return Resume(op.thread, value=op.value, gate=op.gate)
    return op
