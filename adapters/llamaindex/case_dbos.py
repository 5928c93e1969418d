"""DBOS variant: ``llama-agents-dbos``'s ``DBOSRuntime`` on a SQLite system database.

The runtime runs the control loop as a DBOS workflow (workflow id = the run id = the thread
name) and every step as a DBOS step whose output DBOS records (``operation_outputs``); events
reach the runtime as DBOS messages (``notifications``), published events go to the DBOS stream
``published_events`` (``streams``), and the typed state to ``workflow_state``.  Nothing leaves the
machine: no conductor key, no OTLP, ``run_admin_server`` off, one SQLite file per case.

``DBOS.launch()`` recovers every PENDING workflow of its executor id (``local``, the stock default,
shared by every process of the case): a workflow waiting at a gate is replayed to its wait, one
killed mid-step continues.  A launch happens only in operations that execute tasks, never in
``query``/``tamper``/``clone_store``; since recovery is per executor, not per workflow, a launch for
one thread also continues another thread's killed run (its effects are then labelled with the
launching operation's branch).  A run whose step raised ends in DBOS status ERROR; the runtime has
no call that continues it, so ``recover`` refuses it loudly.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import pickle
from pathlib import Path

from adapters.protocol import (
    HarnessError,
    Recover,
    Refused,
    Resume,
    Start,
    StateView,
    Unreadable,
    Workflow,
)
from adapters.calls import record_call
from adapters.reproduction.script import thread_label

from . import tamper
from .case_common import SqliteCase, as_retried_answer, failure
from .store import stored_rows
from .view import decode_state_json
from .workflow import answer_event, build

FILE = "dbos.sqlite"
STREAM = "published_events"
POLL = 0.01  # DBOS polls SQLite for messages and stream rows (no LISTEN/NOTIFY there)


class DBOSCase(SqliteCase):
    FILE = FILE

    def __init__(self, variant, plan: Workflow, workdir: Path):
        super().__init__(variant, plan, workdir)
        self.runtime = None
        self.wf = None

    async def _launch(self) -> None:
        if self.runtime is not None:
            return
        from dbos import DBOS
        from llama_agents.dbos import DBOSRuntime

        logging.getLogger("dbos").setLevel(logging.WARNING)
        DBOS(config={
            "name": "resumefuzz",
            "system_database_url": f"sqlite:///{self.db}",
            "run_admin_server": False,
            "notification_listener_polling_interval_sec": POLL,
            "log_level": "ERROR",  # its WARNINGs are per-run noise (cancelled tasks at close)
        })
        runtime = DBOSRuntime(polling_interval_sec=POLL)
        self.wf = build(self.plan, self.gate, runtime=runtime)
        _forget_queue(self.wf.workflow_name)
        record_call(self.workdir, "wf = await launch()")
        await runtime.launch()
        self.runtime = runtime

    # -- operations ----------------------------------------------------------------------------
    async def _run(self, op, hooks) -> str:
        op = as_retried_answer(op)
        if isinstance(op, Start):
            await self._launch()
            name = thread_label(op.thread)
            record_call(self.workdir, f"await follow({name!r}, wf.run(run_id={name!r}))")
            return await self._follow(op.thread, 0, self.wf.run(run_id=op.thread))
        if isinstance(op, Resume):
            offset = self._stream_length(op.thread)
            if self._status(op.thread) is None:
                raise HarnessError(f"the adapter finds no DBOS workflow {op.thread!r}")
            gate = op.gate or self._asked(op.thread) or max(self.plan.gates, default=1)
            await self._launch()
            from workflows.handler import WorkflowHandler

            hooks.race_ready()
            handler = WorkflowHandler(self.wf, self.runtime.get_external_adapter(op.thread))
            await handler.send_event(answer_event(gate, op.value))
            return await self._follow(op.thread, offset)
        if isinstance(op, Recover):
            return await self._recover(op.thread)
        raise HarnessError(f"DBOSCase.run does not take {op.name}")

    async def _recover(self, thread: str) -> str:
        offset = self._stream_length(thread)
        await self._launch()  # recovers PENDING workflows of this executor
        status = self._status(thread)
        while status == "ENQUEUED":
            # DBOS recovers a workflow by putting it back on a queue (dbos/_recovery.py,
            # ``_recover_workflow``: "re-enqueues rather than executing directly"); its queue
            # thread's dequeue makes it PENDING and runs it.  Until then ENQUEUED is DBOS's word
            # for "recovery under way", no refusal: reading it as one recorded a NondetRecovery
            # that was ours (dbos-wait/NondetRecovery-468c82fa9fa8, withdrawn).  A queue that
            # never dequeues it ends at the op timeout, as ``stuck``.
            await asyncio.sleep(POLL)
            status = self._status(thread)
        if status is None:  # nothing persisted: re-issue the original input
            return await self._follow(thread, 0, self.wf.run(run_id=thread))
        if status == "SUCCESS":
            return "completed"
        if status in ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
            from dbos import DBOS

            # DBOS's documented restart of a failed or cancelled workflow "from its last
            # completed step"; llama-agents-dbos has no call of its own for it.
            await DBOS.resume_workflow_async(thread)
            return await self._follow(thread, offset)
        if status != "PENDING":
            # DBOS answers by status: its own word for the workflow is the refusal.
            raise Refused(f"DBOS workflow {thread!r} has status {status}")
        if self._paused(thread):
            return "interrupted"
        return await self._follow(thread, offset)

    async def _follow(self, run_id: str, offset: int, handler=None) -> str:
        """Read the run's published events from ``offset`` until it pauses or ends: through the
        handler of a run this call started (its stream waits for the DBOS workflow to exist),
        else with ``DBOS.read_stream_async`` from ``offset`` (the handler's stream restarts at 0)."""
        from dbos import DBOS
        from workflows.events import StopEvent, WorkflowIdleEvent

        if handler is not None:
            events = handler.stream_events(expose_internal=True)
        else:
            events = DBOS.read_stream_async(run_id, STREAM, offset=offset, polling_interval_sec=POLL)
        async for event in events:
            if isinstance(event, WorkflowIdleEvent):
                return "interrupted"
            if isinstance(event, StopEvent):
                break
        handle = await DBOS.retrieve_workflow_async(run_id)
        error = None
        try:
            await handle.get_result(polling_interval_sec=POLL)
        except Exception as exc:
            error = failure(exc, self.slot)
        if error is not None:
            raise error  # outside the handler: no implicit __context__
        return "completed"

    # -- reading and altering the store ----------------------------------------------------------
    def _rows(self, sql: str, args=()) -> list:
        return stored_rows(self.db, sql, args)

    def _status(self, run_id: str) -> str | None:
        rows = self._rows("SELECT status FROM workflow_status WHERE workflow_uuid = ?", (run_id,))
        return rows[0][0] if rows else None

    def _stream_length(self, run_id: str) -> int:
        rows = self._rows(
            "SELECT COALESCE(MAX(offset) + 1, 0) FROM streams WHERE workflow_uuid = ? AND key = ?",
            (run_id, STREAM),
        )
        return rows[0][0] if rows else 0

    def _events(self, run_id: str) -> list:
        """The run's published events, decoded (DBOS stores them pickled)."""
        out = []
        for value, serialization in self._rows(
            "SELECT value, serialization FROM streams WHERE workflow_uuid = ? AND key = ?"
            " ORDER BY offset", (run_id, STREAM)):
            try:
                out.append(pickle.loads(base64.b64decode(value)))
            except Exception as exc:
                raise Unreadable(f"stream row does not decode ({serialization}): {exc}") from exc
        return out

    def _asked(self, run_id: str) -> int | None:
        for event in reversed(self._events(run_id)):
            name = type(event).__name__
            if name.startswith("Ask") and name[3:].isdigit():
                return int(name[3:])
        return None

    def _paused(self, run_id: str) -> bool:
        events = self._events(run_id)
        return bool(events) and type(events[-1]).__name__ == "WorkflowIdleEvent"

    def query(self, thread: str) -> StateView:
        status = self._status(thread)
        if status is None:
            return StateView.of(self.plan, (), {}, None)
        rows = self._rows(
            "SELECT state_json FROM workflow_state WHERE run_id = ? AND namespace = ''", (thread,)
        )
        done, answers = decode_state_json(rows[0][0]) if rows else ([], {})
        pending = self._asked(thread) if status == "PENDING" and self._paused(thread) else None
        return StateView.of(self.plan, done, answers, pending)

    def tamper(self, thread: str, how: str, part: str | None = None) -> None:
        with self._connect() as conn:
            if how == "corrupt":  # the DBOS journal: the newest recorded step output
                row = conn.execute(
                    "SELECT function_id, output FROM operation_outputs WHERE workflow_uuid = ?"
                    " AND output IS NOT NULL ORDER BY function_id DESC LIMIT 1", (thread,)
                ).fetchone()
                if row is None:
                    raise HarnessError(f"the adapter finds no recorded output for {thread!r}")
                conn.execute(
                    "UPDATE operation_outputs SET output = ? WHERE workflow_uuid = ?"
                    " AND function_id = ?", (tamper.corrupt_text(row[1]), thread, row[0]))
                return
            row = conn.execute(
                "SELECT state_json FROM workflow_state WHERE run_id = ? AND namespace = ''",
                (thread,),
            ).fetchone()
            done, answers = decode_state_json(row[0]) if row else ([], {})
            value = tamper.bad_state(self.plan, how, done, answers, part)
            conn.execute(
                "UPDATE workflow_state SET state_json = ? WHERE run_id = ? AND namespace = ''",
                (tamper.pydantic_state_json(value, tamper.STATE_QUALNAME), thread),
            )

    async def _shutdown(self) -> None:
        if self.runtime is not None:
            try:
                await self.runtime.destroy()
            finally:
                self.runtime = None


def _forget_queue(workflow_name: str) -> None:
    """Work around a re-launch failure of llama-agents-dbos 0.7.0 with dbos 2.31.1.

    The runtime keeps its DBOS queues in a module-level registry and, when a second runtime in
    the same process registers a workflow name again, assigns ``queue.worker_concurrency``
    (``llama_agents/dbos/runtime.py:143``), a read-only property in dbos 2.31.1: the launch raises
    ``AttributeError``.  A worker that opens several cases launches DBOS once per case, so the
    entry of the previous (destroyed) DBOS instance is dropped before registering again, here
    and in DBOS's process-global registry (``DBOS.destroy()`` keeps it; destroying it instead
    would drop the module-level ``_durable_time`` step and change the application version that
    recovery matches on).
    """
    from dbos._dbos import _get_or_create_dbos_registry
    from llama_agents.dbos import runtime as dbos_runtime

    name = f"_llamaindex_workflow_queue:{workflow_name}"
    with dbos_runtime._workflow_queues_lock:
        dbos_runtime._workflow_queues.pop(name, None)
    registry = _get_or_create_dbos_registry()
    registry.queue_info_map.pop(name, None)
    for key in [k for k in registry.function_type_map if k.startswith(workflow_name + ".")]:
        registry.function_type_map.pop(key, None)  # re-registered by the new runtime
        registry.workflow_info_map.pop(key, None)
