"""Server variants over HTTP: ``llama-agents-server`` as a deployment runs it, driven through its
routes with its own ``WorkflowClient``.

The case's worker process *is* the server process: ``open`` builds a ``WorkflowServer`` on the
case's ``SqliteWorkflowStore`` and serves ``server.app`` with uvicorn on 127.0.0.1 (an ephemeral
port, the socket bound here so its number is known), exactly as ``WorkflowServer.serve`` does;
the lifespan starts the runtime, and with it the framework's own recovery of unfinished handlers
(``RESUME_FRESH_HANDLER_GRACE``, 30 s, untouched).  Steps run in this process, so a ``sigkill``
crash point kills the server as a crash would, and the next operation's worker starts a new one on
the same store, as a restarted deployment does.

Every operation is an HTTP call (``llama_agents.client.WorkflowClient``):

- ``start``: ``POST /workflows/{name}/run-nowait`` with ``handler_id`` = the thread name.
- ``resume(v)``: ``POST /events/{handler_id}`` with the answer event.
- ``recover``: restart the server once the handler is older than the framework's grace (a restart
  sooner leaves a fresh handler alone: the grace keeps one instance from resuming a handler
  another live instance may still run), so that its start-up recovery applies; a handler with
  nothing stored, or one that failed (terminal), is run again with ``POST
  /workflows/{name}/run-nowait`` and its ``handler_id``, which the route documents as continuing
  from a previous run.
- the outcome: ``GET /events/{handler_id}`` (``include_internal``), from the last event seen
  before the call, until the run is idle at a gate (``WorkflowIdleEvent``), stops or fails.

An HTTP error status is the server's refusal: ``Refused`` with its code and body.  ``query`` and
``tamper`` read and edit the store's tables directly, as for the in-process variant.
"""

from __future__ import annotations

import asyncio
import os
import socket
from datetime import datetime, timezone

from adapters.protocol import HarnessError, Recover, Refused, Resume, Start

from .case_common import as_retried_answer, failure
from .case_server import ServerCase
from .workflow import answer_classes, answer_event, build

IDLE, FAILED, STOP = "WorkflowIdleEvent", "WorkflowFailedEvent", "StopEvent"
RESUBSCRIBE = 5.0  # seconds of silence before the event stream is opened again


class HttpServerCase(ServerCase):
    def __init__(self, variant, plan, workdir):
        super().__init__(variant, plan, workdir)
        self.http = None  # the uvicorn server serving self.server.app
        self.serving = None  # its task on self.loop
        self.client = None

    # -- the server process ----------------------------------------------------------------------
    async def _server(self, *, recovering: bool = False):
        if self.server is not None and not recovering:
            return self.server
        await self._stop()
        import uvicorn
        from llama_agents.client import WorkflowClient
        from llama_agents.server import SqliteWorkflowStore, WorkflowServer

        self.wf = build(self.plan, self.gate)  # a workflow object serves one server
        server = WorkflowServer(workflow_store=SqliteWorkflowStore(str(self.db)))
        server.add_workflow(self.name, self.wf, additional_events=answer_classes(self.plan))
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        # As WorkflowServer.serve builds it (server.py:243-244), on our socket.
        # timeout_graceful_shutdown: a restart does not wait on an open event stream forever.
        config = uvicorn.Config(server.app, log_level="warning", lifespan="on",
                                timeout_graceful_shutdown=2)
        self.http = uvicorn.Server(config)
        self.serving = self.loop.create_task(self.http.serve(sockets=[sock]))
        while not self.http.started:  # the lifespan (the runtime's launch) has run
            if self.serving.done():
                self.serving.result()  # raises what stopped it
                raise HarnessError("uvicorn stopped before it started serving")
            await asyncio.sleep(0.005)
        self.server = server
        self.client = WorkflowClient(base_url=f"http://127.0.0.1:{port}")
        return server

    async def _stop(self) -> None:
        if self.http is not None:
            self.http.should_exit = True
            try:
                await asyncio.wait_for(asyncio.shield(self.serving), 20)
            except asyncio.TimeoutError:  # as a supervisor would: the old server is killed
                self.serving.cancel()
            except Exception:  # noqa: BLE001 - a server that failed to stop is gone anyway
                pass
        self.http = self.serving = self.client = self.server = None

    async def _call(self, request):
        """One HTTP call; an error status is the server's refusal, in its own words."""
        import httpx

        try:
            return await request
        except httpx.HTTPStatusError as exc:
            raise Refused(str(exc)) from None

    # -- operations ------------------------------------------------------------------------------
    async def _run(self, op, hooks) -> str:
        op = as_retried_answer(op)
        if isinstance(op, Start):
            await self._server()
            return await self._run_handler(op.thread, after=-1)
        if isinstance(op, Resume):
            await self._server()
            row = self._handler(op.thread)
            run_id = row[0] if row else None
            # The client answers the question its event stream showed last (see ServerCase).
            asked = self._asked(run_id) if run_id else None
            gate = op.gate or asked or max(self.plan.gates, default=1)
            after = self._last_event(run_id) if run_id else -1
            if op.gate is not None:  # a racer: its lines apart from the other racers'
                self.kind = f"racer {os.getpid()}"
            self.record_answer(op.thread, answer_event(gate, op.value), after)
            hooks.race_ready()
            await self._call(self.client.send_event(op.thread, answer_event(gate, op.value)))
            return await self._follow(op.thread, after)
        if isinstance(op, Recover):
            return await self._recover(op.thread)
        raise HarnessError(f"HttpServerCase.run does not take {op.name}")

    async def _run_handler(self, thread: str, after: int) -> str:
        self.record_run(thread, after)
        await self._call(self.client.run_workflow_nowait(self.name, handler_id=thread))
        return await self._follow(thread, after)

    async def _recover(self, thread: str) -> str:
        from llama_agents.server import server as server_module

        row = self._handler(thread)
        grace = server_module.RESUME_FRESH_HANDLER_GRACE  # read, never set
        started = self._started_at(thread)
        if grace is not None and started is not None:
            wait = (started + grace - datetime.now(timezone.utc)).total_seconds()
            if wait > 0:
                await asyncio.sleep(wait + 0.05)  # the framework's own timer: op_timeout covers it
        after = -1 if row is None else self._last_event(row[0])
        await self._server(recovering=True)
        data = None if row is None else await self._handler_data(thread)
        row = self._handler(thread)
        self.record_recovery(thread, None if data is None else data.status,
                             row is not None and row[2] is not None)
        if data is None or data.status in ("failed", "cancelled"):
            return await self._run_handler(thread, after=-1)  # a new run: its own sequence
        if data.status == "completed":
            return "completed"
        if row is not None and row[2] is not None:
            return "interrupted"  # idle at a gate: the restart leaves it for its answer
        return await self._follow(thread, after)

    async def _follow(self, thread: str, after: int) -> str:
        """Read ``GET /events/{handler_id}`` after sequence ``after`` until the run is idle at a
        gate, stops or fails; a stream the server ends is classified by ``GET /handlers``.

        A stream that stays silent for ``RESUBSCRIBE`` seconds is opened again from the last
        event seen, as an SSE client reconnects with ``Last-Event-ID``: a stream opened while
        the server still rebuilds an idle-released run from its journal (``POST /events`` only
        schedules that) can miss the rebuilt run's live events, which the journal then holds."""
        while True:
            stream = self.client.get_workflow_events(
                thread, include_internal_events=True, after_sequence=after)
            events = stream.__aiter__()
            try:
                while True:
                    try:
                        event = await asyncio.wait_for(events.__anext__(), RESUBSCRIBE)
                    except StopAsyncIteration:
                        return await self._ended(thread)
                    except asyncio.TimeoutError:
                        break  # silent: subscribe again from the last event seen
                    after = stream.last_sequence if stream.last_sequence != "now" else after
                    kinds = {event.type, *(event.types or ())}
                    if IDLE in kinds:
                        return "interrupted"
                    if FAILED in kinds:
                        # The server's own report of the failure (an event): its refusal.
                        raise failure(Refused(f"the run failed: {str(event.value)[:300]}"),
                                      self.slot)
                    if STOP in kinds:
                        return "completed"
            finally:
                await stream.aclose()

    async def _ended(self, thread: str) -> str:
        data = await self._handler_data(thread)
        if data is None:
            raise Refused(f"GET /handlers/{thread}: 404 after its event stream ended")
        if data.status == "failed":
            raise failure(Refused(f"the handler failed: {data.error}"), self.slot)
        if data.status == "completed":
            return "completed"
        raise HarnessError(f"the event stream of {thread!r} ended with the handler {data.status}")

    async def _handler_data(self, thread: str):
        """``GET /handlers/{handler_id}``: the handler's ``HandlerData``, or ``None`` (404).

        The route answers 202 for a running handler, 200 for a completed one and 500 for a
        failed or cancelled one, always with the handler's data (``_api.py:813-820``), so the
        status code alone is no refusal here: the body says what the handler is."""
        import httpx
        from llama_agents.client.protocol import HandlerData

        async with httpx.AsyncClient(base_url=self.client.base_url) as http:
            response = await http.get(f"/handlers/{thread}")
        if response.status_code == 404:
            return None
        try:
            return HandlerData.model_validate(response.json())
        except Exception:  # noqa: BLE001 - no handler data: the status is the server's answer
            raise Refused(f"GET /handlers/{thread}: {response.status_code} "
                          f"{response.text[:200]}") from None

    def _started_at(self, thread: str):
        with self._connect() as conn:
            try:
                row = conn.execute("SELECT started_at FROM handlers WHERE handler_id = ?",
                                   (thread,)).fetchone()
            except Exception:  # noqa: BLE001 - no table yet: nothing started
                return None
        if row is None or row[0] is None:
            return None
        value = row[0]
        if isinstance(value, (int, float)):
            return datetime.fromtimestamp(value, timezone.utc)
        parsed = datetime.fromisoformat(str(value))
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self._stop())
        except Exception:  # noqa: BLE001
            pass
        super().close()

