"""Server variants: ``llama-agents-server``'s ``WorkflowServer`` on a ``SqliteWorkflowStore``.

The server journals every control-loop tick (table ``ticks``), the typed state (table
``workflow_state``, written by the steps through the durable state store), handler rows
(``handlers``) and published events (``events``).  Operations go through the server's service
object, the code behind its HTTP routes (``_service.start_workflow`` is ``POST
/workflows/{name}/run-nowait``, ``_service.send_event`` is ``POST /events/{handler_id}``); an
in-process ASGI client loses the run task to garbage collection (notes, pitfall 4).  The thread
name is the handler id.

Server start and recovery.  ``WorkflowServer.start()`` resumes every running, non-idle handler
except those created within ``RESUME_FRESH_HANDLER_GRACE`` (30 s stock,
``llama_agents/server/_runtime/persistence_runtime.py:60``, applied at :339-351).  So that only
``recover`` recovers, a server started for any other operation uses an unbounded grace (it
resumes nothing), and ``recover`` replaces it with a fresh server whose grace is ``None`` (it
resumes every unfinished handler, as a restarted server does 30 s later).  A handler idle at a
gate is rebuilt from the journal on the next ``send_event`` (``IdleReleaseExternalRunAdapter``).
A handler that failed (a step raised) is terminal; ``recover`` then runs the same handler id
again, which starts a new run carrying the stored state (``_service.py:320-356``).
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
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
from .view import decode_state_json, pending_gate
from .workflow import answer_classes, answer_event, build

FILE = "server.sqlite"
NO_RESUME = timedelta(days=36500)
SCRIPT_NAME = "linear"  # the name a reproduction script registers its workflow under
# What ``tamper(corrupt)`` does, as a script writes it: the newest tick of the handler's run, cut
# in half (no longer JSON).
CORRUPT_TICK = (
    "with sqlite3.connect(DB) as db:  # the journal's newest tick, cut in half",
    """    db.execute("UPDATE ticks SET tick_data = substr(tick_data, 1, length(tick_data) / 2) || '{{corrupt'\"""",
    """               " WHERE id = (SELECT id FROM ticks WHERE run_id = (SELECT run_id FROM handlers\"""",
    """               " WHERE handler_id = '{handler}') ORDER BY sequence DESC LIMIT 1)")""",
)


class ServerCase(SqliteCase):
    FILE = FILE

    def __init__(self, variant, plan: Workflow, workdir: Path):
        super().__init__(variant, plan, workdir)
        self.wf = build(plan, self.gate)  # replaced with each new server
        self.name = self.wf.workflow_name
        self.server = None
        self.kind = "call"

    # -- what a reproduction script repeats (over HTTP, whichever way this case calls) ----------
    # One line per HTTP call of ``llama_agents.client.WorkflowClient`` (``client``) and per
    # ``follow`` of ``GET /events/{handler_id}``; the handler id is the thread's label.
    def record(self, source: str) -> None:
        record_call(self.workdir, source, self.kind)

    def record_run(self, thread: str, after: int) -> None:
        """``POST /workflows/{name}/run-nowait`` with the handler id, then its events."""
        name = thread_label(thread)
        self.record(f"await client.run_workflow_nowait({SCRIPT_NAME!r}, handler_id={name!r})")
        self.record(f"await follow(client, {name!r}, after={after})")

    def record_answer(self, thread: str, event, after: int) -> None:
        """``POST /events/{handler_id}`` with the answer, then the events after ``after``."""
        name = thread_label(thread)
        self.record(f"await client.send_event({name!r}, "
                    f"{type(event).__name__}(response={event.response!r}))")
        self.record(f"await follow(client, {name!r}, after={after})")

    def record_recovery(self, thread: str, status: str | None, idle: bool) -> None:
        """What a restarted server's handler ``status`` made the case do (``None``: nothing
        stored, a new run follows).  A running handler that is not ``idle`` at a question is the
        framework's start-up recovery's, after its grace, which a script does not wait for: kind
        ``grace``, a script the generator does not write."""
        name = thread_label(thread)
        if status == "completed" or (status == "running" and idle):
            self.record(f"(await client.get_handler({name!r})).status")
        elif status in ("failed", "cancelled"):
            self.record(f"# GET /handlers/{name} says {status}: run-nowait with its handler id "
                        "continues it")
        elif status == "running":
            record_call(self.workdir, "# the server's start-up recovery resumes it", "grace")

    # -- the server ----------------------------------------------------------------------------
    async def _server(self, *, recovering: bool = False):
        """The running server; a fresh one (resuming unfinished handlers) when ``recovering``."""
        if self.server is not None and not recovering:
            return self.server
        if self.server is not None:
            await self.server.stop()
            self.server = None
        import llama_agents.server.server as server_module
        from llama_agents.server import SqliteWorkflowStore, WorkflowServer

        # PATCHED framework constant (this variant says so in its name): read by the
        # constructor, restored at once so that nothing else in the process sees it.
        stock = server_module.RESUME_FRESH_HANDLER_GRACE
        server_module.RESUME_FRESH_HANDLER_GRACE = None if recovering else NO_RESUME
        try:
            # A workflow object serves one server: its runtime is locked once launched.
            self.wf = build(self.plan, self.gate)
            server = WorkflowServer(workflow_store=SqliteWorkflowStore(str(self.db)))
        finally:
            server_module.RESUME_FRESH_HANDLER_GRACE = stock
        server.add_workflow(self.name, self.wf, additional_events=answer_classes(self.plan))
        await server.start()
        persistence = server._runtime_core._persistence
        if persistence is not None and persistence.resume_task is not None:
            await persistence.resume_task
        self.server = server
        return server

    # -- operations ----------------------------------------------------------------------------
    async def _run(self, op, hooks) -> str:
        op = as_retried_answer(op)
        if isinstance(op, Start):
            server = await self._server()
            self.record_run(op.thread, after=-1)
            data = await server._service.start_workflow(self.wf, op.thread)
            return await self._follow(server, data.run_id)
        if isinstance(op, Resume):
            server = await self._server()
            row = self._handler(op.thread)
            if row is None:
                raise HarnessError(f"the adapter finds no handler {op.thread!r}")
            # The client answers the question its event stream showed last; the journal is
            # left for the server to read (a tampered journal is the server's to refuse).
            gate = op.gate or self._asked(row[0]) or max(self.plan.gates, default=1)
            after = self._last_event(row[0])
            if op.gate is not None:  # a racer: its lines apart from the other racers'
                self.kind = f"racer {os.getpid()}"
            self.record_answer(op.thread, answer_event(gate, op.value), after)
            hooks.race_ready()
            await self._send(server, op.thread, answer_event(gate, op.value))
            return await self._follow(server, row[0], after)
        if isinstance(op, Recover):
            return await self._recover(op.thread)
        raise HarnessError(f"ServerCase.run does not take {op.name}")

    async def _send(self, server, thread: str, event) -> None:
        """``_service.send_event`` (``POST /events/{handler_id}``) with its last step awaited.

        The service refuses unknown and finished handlers (``resolve_handler``), then hands the
        event to the run's external adapter through ``ctx.send_event``, which only schedules it
        (``workflows/context/external_context.py:117-129``): the reload of an idle-released run
        happens later, in the background.  Awaiting the same adapter call makes the delivery (and
        the rebuild from the journal) finish before the run is followed."""
        from workflows.runtime.types.ticks import TickAddEvent

        data = await server._service.resolve_handler(thread)
        adapter = server._runtime_core._runtime.get_external_adapter(data.run_id)
        await adapter.send_event(TickAddEvent(event=event))

    async def _recover(self, thread: str) -> str:
        row = self._handler(thread)
        after = -1 if row is None else self._last_event(row[0])
        server = await self._server(recovering=True)
        data = await server._service.load_persistent_handler(thread)
        idle = data is not None and data.idle_since is not None
        self.record_recovery(thread, None if data is None else data.status, idle)
        if data is None:  # nothing persisted: re-issue the original input
            self.record_run(thread, after=-1)
            data = await server._service.start_workflow(self.wf, thread)
            return await self._follow(server, data.run_id)
        if data.status == "completed":
            return "completed"
        if data.status in ("failed", "cancelled"):
            self.record_run(thread, after=-1)
            data = await server._service.start_workflow(self.wf, thread)
            return await self._follow(server, data.run_id)
        if data.idle_since is not None:
            return "interrupted"  # paused at a gate: the restart leaves it for its answer
        return await self._follow(server, data.run_id, after)

    async def _follow(self, server, run_id: str, after: int = -1) -> str:
        """Follow this process's run of ``run_id`` until it pauses or ends.

        A run rebuilt inside ``send_event`` may already have ended (and left the runtime's table
        of active runs) when the handler is asked for: the outcome is then read from the events
        the run stored after sequence ``after``."""
        from workflows.events import WorkflowIdleEvent

        error = None
        try:
            handler = server._service._workflow_run_handler(self.name, run_id)
            async for event in handler.stream_events(expose_internal=True):
                if isinstance(event, WorkflowIdleEvent):
                    return "interrupted"
            await handler
        except RuntimeError as exc:
            if "No active workflow" not in str(exc):
                error = failure(exc, self.slot)
            else:
                return self._stored_outcome(run_id, after)
        except Exception as exc:
            error = failure(exc, self.slot)
        if error is not None:
            raise error  # outside the handler: no implicit __context__
        return "completed"

    def _stored_outcome(self, run_id: str, after: int) -> str:
        kinds = [k for k, _ in self._events_after(run_id, after)]
        for kind, text in reversed(self._events_after(run_id, after)):
            if kind == "WorkflowFailedEvent":
                raise failure(Refused(f"the run failed: {text[:300]}"), self.slot)
            if kind in ("StopEvent", "WorkflowIdleEvent"):
                return "completed" if kind == "StopEvent" else "interrupted"
        raise HarnessError(f"run {run_id} left no outcome after event {after}: {kinds}")

    def _events_after(self, run_id: str, after: int) -> list[tuple[str, str]]:
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT event_json FROM events WHERE run_id = ? AND sequence > ? ORDER BY sequence",
                (run_id, after),
            ).fetchall()
        out = []
        for (text,) in rows:
            try:
                out.append((json.loads(text).get("type", ""), text))
            except (ValueError, AttributeError):
                out.append(("", text))
        return out

    def _last_event(self, run_id: str) -> int:
        rows = stored_rows(self.db, "SELECT MAX(sequence) FROM events WHERE run_id = ?", (run_id,))
        return -1 if not rows or rows[0][0] is None else rows[0][0]

    # -- reading and altering the store ----------------------------------------------------------
    def _handler(self, thread: str):
        """``(run_id, status, idle_since)`` of the thread's handler row, or ``None``."""
        rows = stored_rows(self.db, "SELECT run_id, status, idle_since FROM handlers"
                                    " WHERE handler_id = ?", (thread,))
        return rows[0] if rows else None

    def _state_text(self, run_id: str):
        with self._connect() as conn:
            row = conn.execute(
                "SELECT state_json FROM workflow_state WHERE run_id = ? AND namespace = ''",
                (run_id,),
            ).fetchone()
        return None if row is None else row[0]

    def _asked(self, run_id: str) -> int | None:
        """The gate of the newest ``Ask<t>`` (``InputRequiredEvent``) in the run's published
        events: what a client of ``GET /events/{handler_id}`` was asked last."""
        with self._connect() as conn:
            rows = conn.execute(
                "SELECT event_json FROM events WHERE run_id = ? ORDER BY sequence DESC", (run_id,)
            ).fetchall()
        for (text,) in rows:
            try:
                kind = json.loads(text).get("type", "")
            except (ValueError, AttributeError):
                continue
            if kind.startswith("Ask") and kind[3:].isdigit():
                return int(kind[3:])
        return None

    async def _replay(self, run_id: str) -> dict:
        """The journal folded by the framework's own reducer into a serialized context (decoding,
        not execution: no step runs)."""
        from llama_agents.server import SqliteWorkflowStore
        from llama_agents.server._store.abstract_workflow_store import stream_workflow_ticks
        from workflows.context.serializers import JsonSerializer
        from workflows.runtime.control_loop import replay_ticks_stream
        from workflows.runtime.types.internal_state import BrokerState

        serializer = JsonSerializer()
        store = SqliteWorkflowStore(str(self.db), auto_migrate=False)
        ticks = stream_workflow_ticks(store, run_id, serializer=serializer)
        replay = await replay_ticks_stream(BrokerState.from_workflow(self.wf), ticks, run_id=run_id)
        return replay.state.to_serialized(serializer).model_dump(mode="json")

    def _done_answers(self, run_id: str):
        text = self._state_text(run_id)
        return ([], {}) if text is None else decode_state_json(text)

    def query(self, thread: str) -> StateView:
        row = self._handler(thread)
        if row is None:
            return StateView.of(self.plan, (), {}, None)
        run_id = row[0]
        done, answers = self._done_answers(run_id)
        try:
            snapshot = self.loop.run_until_complete(self._replay(run_id))
        except Exception as exc:
            raise Unreadable(f"the tick journal does not replay: {exc}") from exc
        pending = pending_gate(self.plan, self.gate, snapshot, done, self._asked(run_id))
        return StateView.of(self.plan, done, answers, pending)

    def tamper(self, thread: str, how: str, part: str | None = None) -> None:
        row = self._handler(thread)
        if row is None:
            raise HarnessError(f"the adapter finds nothing stored for {thread!r} to tamper with")
        run_id = row[0]
        if how == "corrupt":
            for line in CORRUPT_TICK:
                self.record(line.format(handler=thread_label(thread)))
        with self._connect() as conn:
            if how == "corrupt":  # the journal: the newest tick no longer decodes
                tick_id, data = conn.execute(
                    "SELECT id, tick_data FROM ticks WHERE run_id = ? ORDER BY sequence DESC"
                    " LIMIT 1", (run_id,)).fetchone()
                conn.execute("UPDATE ticks SET tick_data = ? WHERE id = ?",
                             (tamper.corrupt_text(data), tick_id))
                return
            done, answers = self._done_answers(run_id)
            value = tamper.bad_state(self.plan, how, done, answers, part)
            conn.execute(
                "UPDATE workflow_state SET state_json = ? WHERE run_id = ? AND namespace = ''",
                (tamper.pydantic_state_json(value, tamper.STATE_QUALNAME), run_id),
            )

    async def _shutdown(self) -> None:
        if self.server is not None:
            try:
                await self.server.stop()
            except Exception:
                pass
            self.server = None
