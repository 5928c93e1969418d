"""pydantic-graph-persistence 0.1.1: ``LatestStatePersistence.load_next`` is not atomic, so two
callers resuming one paused run both get its pending node, and the gate runs twice.

``load_next`` awaits ``load()``, checks ``status == "created"``, sets ``"pending"`` and awaits
``save()``: with any backend whose callbacks really await I/O, a second caller's ``load()``
runs between the two and sees ``"created"`` too.  pydantic-graph's own ``FileStatePersistence``
does the same steps under a file lock (``persistence/file.py:96-104``), so there the second
caller gets nothing (``GraphRuntimeError``).  resumefuzz saw it across processes in 2 of 20
replays of a race entry (docs/stores.md, "seen but not confirmed"); here the callbacks yield to
the event loop once, as an awaited database call does, which makes the interleaving certain.

Run with pydantic-graph 1.107.10 and pydantic-graph-persistence 0.1.1; exits 1 when the gate
ran more than once, 0 otherwise.
"""

import asyncio
import sys
from dataclasses import dataclass

from pydantic_graph import BaseNode, End, GraphRunContext
from pydantic_graph.graph import Graph
from pydantic_graph_persistence import LatestStatePersistence

ran = []  # one entry per execution of the gate node (its side effect)


@dataclass
class State:
    answers: list[str]


@dataclass
class Gate(BaseNode[State, None, str]):
    answer: str | None = None

    async def run(self, ctx: GraphRunContext[State]) -> End[str]:
        ran.append(self.answer)
        ctx.state.answers.append(self.answer)
        return End(self.answer)


graph = Graph(nodes=[Gate])
stored = {}


async def load():
    await asyncio.sleep(0)  # an awaited read, as any database client does
    return stored.get("snapshot")


async def save(snapshot: dict) -> None:
    await asyncio.sleep(0)  # an awaited write
    stored["snapshot"] = snapshot


async def resume(value: str) -> str:
    persistence = LatestStatePersistence(load=load, save=save)
    try:
        async with graph.iter_from_persistence(persistence) as run:
            run.next_node.answer = value
            async for _ in run:
                pass
        return f"ran with {value!r}"
    except Exception as exc:  # noqa: BLE001 - a refusal is the correct outcome for one of them
        return f"refused: {type(exc).__name__}: {str(exc).splitlines()[0]}"


async def main() -> int:
    # The run is set up and paused at its gate (the node is stored with status 'created').
    await graph.initialize(Gate(), LatestStatePersistence(load=load, save=save),
                           state=State(answers=[]))
    outcomes = await asyncio.gather(resume("a"), resume("b"))
    print("resumers:", outcomes)
    if len(ran) > 1:
        print(f"DEFECT: the paused gate ran {len(ran)} times ({ran}): two resumers both "
              "consumed one interrupt")
        return 1
    print(f"ok: the gate ran once ({ran})")
    return 0


sys.exit(asyncio.run(main()))
