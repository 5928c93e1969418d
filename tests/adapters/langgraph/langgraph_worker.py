"""A stand-in for the engine's worker, for the tests that need a process of its own (SIGKILL,
races): open the case on the shared workdir, run one op with EngineHooks, print the outcome.

Argument: one JSON document {variant, workflow, workdir, op, seq, ledger, racer?, ready_fd?,
go_fd?}.  A forced racer writes one byte to ``ready_fd`` once it has read the interrupted
checkpoint and blocks on ``go_fd`` until the test has heard from every racer.
"""

import json
import os
import sys

from adapters.langgraph import LangGraphAdapter
from adapters.protocol import Workflow
from refmodel import op_from_json


def main() -> None:
    job = json.loads(sys.argv[1])
    adapter = LangGraphAdapter()
    os.environ.update(adapter.environment())
    adapter.prepare()
    from langgraph_testkit import run_op  # after the environment is set

    from fuzz.internal.ledger import Ledger

    variant = next(v for v in adapter.variants() if v.name == job["variant"])
    case = adapter.open(variant, Workflow.from_json(job["workflow"]), job["workdir"])
    op = op_from_json(job["op"])
    ledger = Ledger(job["ledger"])

    ready = None
    if job.get("ready_fd") is not None:
        def ready():
            os.write(job["ready_fd"], b"r")
            os.read(job["go_fd"], 1)

    from fuzz.internal.hooks import EngineHooks

    if ready is not None:
        hooks = EngineHooks(op, seq=job["seq"], branch=op.thread, ledger=ledger,
                            racer=job.get("racer", 0), race_ready=ready)
        try:
            outcome = case.run(op, hooks)
        except Exception as exc:  # noqa: BLE001
            outcome = f"rejected: {type(exc).__name__}"
    else:
        outcome, _, _ = run_op(case, op, job["seq"], ledger)
    case.store.release()  # not close(): the test's own case owns a PostgreSQL database
    print(json.dumps({"outcome": outcome, "pid": os.getpid()}))


if __name__ == "__main__":
    main()
