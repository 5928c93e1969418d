"""llama-agents-server 0.8.0 / llama-index-workflows 2.26.1: an idle handler's run can vanish from
the server's runtime, and the answer sent to it is refused with ``No active workflow with run_id``.

Two handlers wait for a human answer in one ``WorkflowServer``.  The first one's run then ends
(here its step fails, as in the fuzzer's trace; answering it so that it completes does the same)
and a garbage collection runs.  The second handler's run task is destroyed while pending ("Task
was destroyed but it is pending!"): ``BasicRuntime`` keeps runs in a ``WeakValueDictionary``
and, once the other run is gone, nothing else holds the task of a run that is idle.  The handler
row still says running and the idle-release layer still counts the run as active, so it is not
reloaded from the journal: the answer fails inside ``send_event``.  (With the second handler
alone in the server, the same collection leaves it alone and the answer is delivered.)

The calls are ``WorkflowServer._service`` / ``_runtime`` in process: the code behind
``POST /workflows/{name}/run-nowait`` and ``POST /events/{handler_id}`` (which, in the stock
service, schedules the delivery and returns, so over HTTP the answer is lost silently).
Found by resumefuzz (corpus entries ``corpus/llamaindex/server-event-private/Stuck-7c32d6826751``
and ``server-wait-private/Stuck-da279141be68``, where the fuzzer's own replays show it in 3 of 6
and 1 of 6 runs).  Exits 1 when the answer is refused, 0 when it is delivered and the run ends.
"""

import asyncio
import gc
import sys
import tempfile
from pathlib import Path

from llama_agents.server import SqliteWorkflowStore, WorkflowServer
from workflows import Workflow, step
from workflows.events import (
    HumanResponseEvent,
    InputRequiredEvent,
    StartEvent,
    StopEvent,
    WorkflowIdleEvent,
)
from workflows.runtime.types.ticks import TickAddEvent


class Ask(InputRequiredEvent):
    pass


class Answer(HumanResponseEvent):
    response: str


class Approval(Workflow):
    @step
    async def ask(self, ev: StartEvent) -> Ask:
        return Ask()

    @step
    async def act(self, ev: Answer) -> StopEvent:
        if ev.response == "fail":
            raise RuntimeError("the step failed")
        return StopEvent(result=ev.response)


async def until_idle_or_done(server, run_id: str) -> str:
    handler = server._service._workflow_run_handler("approval", run_id)
    async for event in handler.stream_events(expose_internal=True):
        if isinstance(event, WorkflowIdleEvent):
            return "waiting"
    await handler
    return "done"


async def answer(server, handler_id: str, value: str) -> None:
    data = await server._service.resolve_handler(handler_id)
    adapter = server._runtime.get_external_adapter(data.run_id)
    await adapter.send_event(TickAddEvent(event=Answer(response=value)))


async def main() -> int:
    db = Path(tempfile.mkdtemp()) / "store.db"
    server = WorkflowServer(workflow_store=SqliteWorkflowStore(str(db)))
    server.add_workflow("approval", Approval(timeout=None), additional_events=[Answer])
    await server.start()
    try:
        wf = server._service._runtime.get_workflow("approval")
        first = await server._service.start_workflow(wf, "first")
        print("first:", await until_idle_or_done(server, first.run_id))
        second = await server._service.start_workflow(wf, "second")
        print("second:", await until_idle_or_done(server, second.run_id))
        await server._service.send_event("first", Answer(response="fail"))
        try:
            await until_idle_or_done(server, first.run_id)
        except Exception as exc:  # noqa: BLE001 - the first run's failure is the set-up
            print(f"first failed as intended: {type(exc).__name__}: {exc}")
        # Any collection does it (the fuzzer's runs hit one by allocation); force one here.
        gc.collect()
        try:
            await answer(server, "second", "yes")
        except RuntimeError as exc:
            print(f"DEFECT: the answer to the idle handler 'second' was refused: {exc}")
            return 1
        print("second:", await until_idle_or_done(server, second.run_id))
        return 0
    finally:
        await server.stop()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
