"""Framework-only: one idle HITL handler on llama-agents-server over HTTP (uvicorn, 127.0.0.1),
workflow timeout=None; a gc.collect() in the server process while the run waits; the answer
POSTed to /events is accepted, and the run never moves.  Exit 1 when the defect shows.
argv[1] == "nogc": same without the collection (control)."""
import asyncio, gc, socket, sys, tempfile, os
import httpx, uvicorn
from llama_agents.server import SqliteWorkflowStore, WorkflowServer
from workflows import Workflow, step
from workflows.events import HumanResponseEvent, InputRequiredEvent, StartEvent, StopEvent

class Ask(InputRequiredEvent): pass
class Answer(HumanResponseEvent):
    response: str

class Approval(Workflow):
    @step
    async def ask(self, ev: StartEvent) -> Ask:
        return Ask()
    @step
    async def act(self, ev: Answer) -> StopEvent:
        return StopEvent(result=ev.response)

async def until(client, hid, kinds, limit):
    stream = client.get_workflow_events(hid, include_internal_events=True)
    try:
        async with asyncio.timeout(limit):
            async for ev in stream:
                got = {ev.type, *(ev.types or ())}
                for k in kinds:
                    if k in got:
                        return k
    except TimeoutError:
        return None
    finally:
        await stream.aclose()

async def main(collect: bool) -> int:
    db = os.path.join(tempfile.mkdtemp(), "s.db")
    server = WorkflowServer(workflow_store=SqliteWorkflowStore(db))
    server.add_workflow("approval", Approval(timeout=float(os.environ["WF_TIMEOUT"]) if os.environ.get("WF_TIMEOUT") else None), additional_events=[Answer])
    sock = socket.socket(); sock.bind(("127.0.0.1", 0)); port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(server.app, log_level="warning", lifespan="on"))
    serving = asyncio.create_task(uv.serve(sockets=[sock]))
    while not uv.started:
        await asyncio.sleep(0.01)
    from llama_agents.client import WorkflowClient
    client = WorkflowClient(base_url=f"http://127.0.0.1:{port}")
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        await client.run_workflow_nowait("approval", handler_id="h1")
        print("idle:", await until(client, "h1", ["WorkflowIdleEvent"], 10))
        if collect:
            print("gc.collect():", gc.collect())
        print("POST /events:", await client.send_event("h1", Answer(response="yes")))
        got = await until(client, "h1", ["StopEvent"], 15)
        print("GET /handlers/h1:", (await http.get("/handlers/h1")).json().get("status"))
    uv.should_exit = True
    await serving
    print("DEFECT: the run never moved after its answer" if got is None else "run completed")
    return 1 if got is None else 0

sys.exit(asyncio.run(main(len(sys.argv) < 2 or sys.argv[1] != "nogc")))
