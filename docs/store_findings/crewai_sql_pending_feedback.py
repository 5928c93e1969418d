"""crewai-persistence-sql 0.2.1: a flow paused by ``@human_feedback`` on ``SQLFlowPersistence``
cannot be resumed, and the store does not show the pause.

``SQLFlowPersistence`` implements ``save_state`` / ``load_state`` only.  CrewAI's
``FlowPersistence`` makes the pending-feedback methods optional: ``save_pending_feedback`` falls
back to ``save_state`` (the pause's context is dropped) and ``load_pending_feedback`` returns
``None``, so ``Flow.from_pending(flow_id, persistence)`` raises ``ValueError("No pending
feedback found ...")``.  Found by resumefuzz on PostgreSQL and MariaDB (corpus entries
``corpus/crewai/store-sqlpostgres-persist/`` and ``store-sqlmariadb-persist/``: a 1-operation
trace, the persisted state shows no pending interrupt after the pause; CrewAI's own
``SQLiteFlowPersistence`` passes the same trace 3/3).

Usage: ``python crewai_sql_pending_feedback.py [SQLALCHEMY_URL]`` (default: a SQLite file in a
temporary directory; e.g. ``postgresql+psycopg://postgres@127.0.0.1:5432/test``).  Needs crewai
1.15.30 and crewai-persistence-sql 0.2.1.  Exits 1 when the defect shows, 0 when the flow resumes.
"""

import os
import sys
import tempfile
import uuid

# CrewAI phones home unless told not to.
os.environ.update({"CREWAI_DISABLE_TELEMETRY": "true", "CREWAI_DISABLE_TRACKING": "true",
                   "OTEL_SDK_DISABLED": "true", "CREWAI_TRACING_ENABLED": "false",
                   "CREWAI_DISABLE_VERSION_CHECK": "true", "CREWAI_TESTING": "true"})

from crewai.flow.async_feedback import HumanFeedbackPending  # noqa: E402
from crewai.flow.flow import Flow, FlowState, listen, start  # noqa: E402
from crewai.flow.human_feedback import human_feedback  # noqa: E402
from crewai.flow.persistence import persist  # noqa: E402
from crewai_persistence_sql import SQLFlowPersistence  # noqa: E402

url = sys.argv[1] if len(sys.argv) > 1 else f"sqlite:///{tempfile.mkdtemp()}/flows.db"
table = f"flows_{uuid.uuid4().hex[:8]}"
store = SQLFlowPersistence(url, table_name=table)


class Pause:
    """A feedback provider that pauses the flow durably (no console)."""

    def request_feedback(self, context, flow):
        raise HumanFeedbackPending(context=context)


class State(FlowState):
    approved: str = ""


@persist(store)
class Review(Flow[State]):
    _skip_auto_memory = True

    @start()
    @human_feedback(message="approve?", provider=Pause())
    def ask(self):
        return "draft"

    @listen(ask)
    def apply(self):
        self.state.approved = self.last_human_feedback.feedback


flow = Review()
flow_id = flow.state.id
paused = flow.kickoff()
assert isinstance(paused, HumanFeedbackPending), f"the flow did not pause: {paused!r}"
try:
    resumed = Review.from_pending(flow_id, store)
    resumed.resume("yes")
except Exception as exc:  # noqa: BLE001 - the defect is the exception
    print(f"DEFECT: the paused flow cannot be resumed from {type(store).__name__}: "
          f"{type(exc).__name__}: {exc}; load_pending_feedback -> "
          f"{store.load_pending_feedback(flow_id)!r}")
    sys.exit(1)
print(f"ok: resumed, approved={resumed.state.approved!r}")
sys.exit(0)
