"""Core variants: ``llama-index-workflows`` alone, persisted the documented way.

The caller stores ``handler.ctx.to_dict()`` snapshots (``SnapshotStore``, one row each) and
resumes with ``Context.from_dict(workflow, snapshot)`` + ``workflow.run(ctx=...)`` +
``handler.ctx.send_event(Ans<g>(response=v))``, the spelling of the docs' human-in-the-loop
example.  When the caller snapshots is the variant's ``snapshot`` option:

- ``idle``: when the run pauses for input (``WorkflowIdleEvent`` after the ``InputRequiredEvent``)
  and when it completes: the human-in-the-loop pattern;
- ``step``: additionally on every event ``handler.stream_events(expose_internal=True)`` delivers
  while the context reports ``is_running`` (one per step start and step end): a caller that wants
  crash recovery from the core.

Every framework call and every save or load of the caller's store is recorded
(``adapters.calls.record_call``) as the line a user would write, for the reproduction script
(``repro.py``); a racer records under its own kind, ``racer <pid>``.

No snapshot is written after a failure: what the store holds after an exception is what it would
hold after SIGKILL at the same point.  Resume and fork are the same call (a snapshot is a plain
value); a fork first copies the snapshot at which its gate was pending to the new branch's rows.
"""

from __future__ import annotations

import asyncio
import json
import os

from adapters.protocol import (
    Case,
    Fork,
    HarnessError,
    Recover,
    Resume,
    StaleResume,
    Start,
    StateView,
    Unreadable,
    Workflow,
)
from adapters.calls import record_call
from adapters.reproduction.script import thread_label

from . import tamper
from .case_common import close_loop, failure
from .store import SnapshotStore, copy_side_files, copy_sqlite
from .view import parse_snapshot, quiescent, snapshot_state, snapshot_view
from .workflow import SLOT, answer_event, build, operation


class CoreCase(Case):
    def __init__(self, variant, plan: Workflow, workdir):
        from workflows import Context
        from workflows.events import InputRequiredEvent, WorkflowIdleEvent

        self._Context, self._Idle, self._Ask = Context, WorkflowIdleEvent, InputRequiredEvent
        self.plan, self.workdir = plan, workdir
        self.gate = variant.options["gate"]
        self.schedule = variant.options["snapshot"]
        self.store = SnapshotStore(workdir)
        self.wf = build(plan, self.gate)
        self.loop = asyncio.new_event_loop()
        self.kind = "call"

    def record(self, source: str) -> None:
        record_call(self.workdir, source, self.kind)

    # -- operations ----------------------------------------------------------------------------
    def run(self, op, hooks) -> str:
        with operation(hooks, self.plan):
            return self.loop.run_until_complete(self._run(op, hooks))

    async def _run(self, op, hooks) -> str:
        if isinstance(op, Start):
            self.record(f"await drive({thread_label(op.thread)!r}, wf.run())")
            return await self._drive(op.thread, self.wf.run(), asked=None)
        if isinstance(op, Resume):
            return await self._answer(op.thread, op.value, hooks, op.gate)
        if isinstance(op, Fork):
            row = self._gate_row(op.thread, op.gate)
            self.record(f"save({thread_label(op.new_thread)!r}, snapshot({row}), "
                        f"asked={self.store.asked(row)!r})")
            self.store.copy_row(row, op.new_thread, f"fork of {op.thread}#{row}")
            return await self._answer(op.new_thread, op.value, hooks)
        if isinstance(op, Recover):
            return await self._recover(op.thread)
        if isinstance(op, StaleResume):
            # The snapshot the caller stored when gate ``op.gate`` asked, answered once since:
            # the docs' resume spelling on that (stale) context dict.
            row = self._gate_row(op.thread, op.gate)
            body = next(b for i, _, b in self.store.rows(op.thread) if i == row)
            return await self._send_answer(op.thread, json.loads(body), op.gate, op.value, hooks,
                                           f"snapshot({row})")
        raise HarnessError(f"CoreCase.run does not take {op.name}")

    async def _answer(self, thread: str, value: str, hooks, gate: int | None = None) -> str:
        """Answer the question recorded with the head snapshot; a caller that names the
        question it was shown (``gate``, a racer) answers that one, and the restored run decides
        what an answer to another question does.  LlamaIndex core has no refusal to give: the
        application answers only a snapshot taken at a question, and on a finished run's final
        snapshot it makes no call (a no-op, ``completed``)."""
        head = self.store.latest(thread)
        if head is None:
            raise HarnessError(f"the application has no snapshot of {thread!r} to answer")
        _, asked, body = head
        snapshot = json.loads(body)  # the docs' spelling: json.loads of the stored text
        if asked is None and gate is None:
            if isinstance(snapshot, dict) and snapshot.get("is_running") is False:
                return "completed"  # nothing asks: the application makes no call
            raise HarnessError(f"the head snapshot of {thread!r} was not taken at a question: "
                               "the application has nothing to answer and made no call")
        if gate is not None:  # a racer: its lines apart from the other racers'
            self.kind = f"racer {os.getpid()}"
        return await self._send_answer(thread, snapshot, gate if gate is not None else asked,
                                       value, hooks, f"load({thread_label(thread)!r})")

    async def _send_answer(self, thread: str, snapshot: dict, gate: int, value: str, hooks,
                           snapshot_src: str) -> str:
        """``Context.from_dict`` + ``run(ctx=...)`` + ``send_event(Ans<gate>(response=v))``;
        ``snapshot_src`` names the snapshot in the script."""
        self.record(f"restored = Context.from_dict(wf, {snapshot_src})")
        ctx = self._Context.from_dict(self.wf, snapshot)
        hooks.race_ready()
        answer = answer_event(gate, value)
        self.record("handler = wf.run(ctx=restored)")
        handler = self.wf.run(ctx=ctx)
        self.record(f"handler.ctx.send_event({type(answer).__name__}(response={value!r}))")
        handler.ctx.send_event(answer)
        self.record(f"await drive({thread_label(thread)!r}, handler)")
        return await self._drive(thread, handler, asked=None)

    async def _recover(self, thread: str) -> str:
        head = self.store.latest(thread)
        if head is None:  # nothing stored: re-issue the original input
            self.record(f"await drive({thread_label(thread)!r}, wf.run())")
            return await self._drive(thread, self.wf.run(), asked=None)
        _, asked, body = head
        snapshot = json.loads(body)
        if isinstance(snapshot, dict) and snapshot.get("is_running") is False:
            return "completed"  # the head is a finished run's final snapshot: nothing to recover
        if isinstance(snapshot, dict) and quiescent(snapshot):
            # A paused run waits for an answer, not for recovery; restored, it would wait
            # silently: the control loop announces WorkflowIdleEvent only after a tick other
            # than its session start (workflows/runtime/control_loop/reduce.py:291-301, 331).
            return "interrupted"
        ctx = self._Context.from_dict(self.wf, snapshot)
        name = thread_label(thread)
        self.record(f"await drive({name!r}, wf.run(ctx=Context.from_dict(wf, load({name!r}))), "
                    f"asked={asked!r})")
        return await self._drive(thread, self.wf.run(ctx=ctx), asked=asked)

    async def _drive(self, thread: str, handler, asked: int | None) -> str:
        """Read the stream until the run pauses or ends, snapshotting on the variant's schedule.

        ``asked`` carries over the question of a restored pause: a restored waiter does not
        emit its ``InputRequiredEvent`` again."""
        paused = False
        async for event in handler.stream_events(expose_internal=True):
            if isinstance(event, self._Ask):
                asked = int(type(event).__name__[3:])
            if isinstance(event, self._Idle):
                paused = True
                break
            if self.schedule == "step":
                snapshot = handler.ctx.to_dict()
                if snapshot.get("is_running"):
                    self.store.append(thread, "step", snapshot)
        if paused:
            self.store.append(thread, "idle", handler.ctx.to_dict(), asked=asked)
            await _stop(handler)
            return "interrupted"
        error = None
        try:
            await handler  # raises the failing step's exception (CrashInjected included)
        except Exception as exc:
            error = failure(exc, SLOT)
        if error is not None:
            raise error
        self.store.append(thread, "end", handler.ctx.to_dict())
        return "completed"

    def _gate_row(self, thread: str, gate: int) -> int:
        for row_id, asked, body in reversed(self.store.rows(thread)):
            try:
                view = snapshot_view(self.plan, self.gate, parse_snapshot(body), asked)
            except Unreadable:
                continue
            if view.pending == gate:
                return row_id
        raise HarnessError(f"the application stored no snapshot of {thread!r} with gate {gate} "
                           "pending")

    # -- reading and altering the store ----------------------------------------------------------
    def query(self, thread: str) -> StateView:
        head = self.store.latest(thread)
        if head is None:
            return StateView.of(self.plan, (), {}, None)
        _, asked, body = head
        return snapshot_view(self.plan, self.gate, parse_snapshot(body), asked)

    def tamper(self, thread: str, how: str, part: str | None = None) -> None:
        head = self.store.latest(thread)
        if head is None:
            raise HarnessError(f"the application stored nothing for {thread!r} to tamper with")
        row_id, _, body = head
        if how == "corrupt":
            self.store.overwrite(row_id, tamper.corrupt_text(body))
            return
        snapshot = parse_snapshot(body)
        done, answers = snapshot_state(snapshot)
        value = tamper.bad_state(self.plan, how, done, answers, part)
        snapshot["state"]["state_data"] = tamper.pydantic_state_json(value, tamper.STATE_QUALNAME)
        self.store.overwrite(row_id, json.dumps(snapshot))

    def clone_store(self, dest) -> None:
        copy_sqlite(self.store.path, dest, wal=False)
        copy_side_files(self.workdir, dest)

    def close(self) -> None:
        self.store.close()
        close_loop(self.loop)


async def _stop(handler) -> None:
    """Stop a paused run in memory (its snapshot is stored); the store is not touched."""
    try:
        await handler.cancel_run()
    except Exception:
        pass
    try:
        await handler
    except (Exception, asyncio.CancelledError):  # the cancellation of the run we just stopped
        pass
