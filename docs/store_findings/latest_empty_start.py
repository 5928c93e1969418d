"""pydantic-graph-persistence 0.1.1: ``LatestStatePersistence`` cannot start a run with
``graph.iter(..., persistence=p)`` while nothing is stored yet.

``LatestStatePersistence._load`` validates whatever ``load()`` returns as a snapshot; with no
snapshot stored there is nothing valid to return (``None`` and ``{}`` both fail), so the first
``snapshot_node_if_new`` of a new run raises ``ValidationError``.  ``graph.initialize(...)`` then
``iter_from_persistence`` works (it saves before it loads).  Found by resumefuzz (corpus
entry ``corpus/pydantic-graph/store-latest-start_iter-resume_ifp-recover_ifp/
Unclassified-05e7311948ae.json``, a 1-operation trace).

Run with pydantic-graph 1.107.10 and pydantic-graph-persistence 0.1.1 installed; exits 1 when
the defect shows, 0 when the run completes.
"""

import asyncio
import sys
from dataclasses import dataclass

from pydantic_graph import BaseNode, End, GraphRunContext
from pydantic_graph.graph import Graph
from pydantic_graph_persistence import LatestStatePersistence


@dataclass
class State:
    n: int = 0


@dataclass
class Step(BaseNode[State, None, int]):
    async def run(self, ctx: GraphRunContext[State]) -> End[int]:
        ctx.state.n += 1
        return End(ctx.state.n)


graph = Graph(nodes=[Step])
stored = {}


async def load():
    return stored.get("snapshot")  # a new run: nothing stored yet


async def save(snapshot: dict) -> None:
    stored["snapshot"] = snapshot


async def main() -> int:
    persistence = LatestStatePersistence(load=load, save=save)
    try:
        async with graph.iter(Step(), state=State(), persistence=persistence) as run:
            async for _ in run:
                pass
    except Exception as exc:  # noqa: BLE001 - the defect is the exception
        first = (str(exc).splitlines() or [""])[0]
        print(f"DEFECT: a new run on an empty LatestStatePersistence raised "
              f"{type(exc).__name__}: {first}")
        return 1
    print(f"ok: the run completed with {run.result.output!r}; stored: {stored['snapshot']['kind']}")
    return 0


sys.exit(asyncio.run(main()))
