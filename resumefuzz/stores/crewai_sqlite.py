"""CrewAI's own ``SQLiteFlowPersistence`` through the factory protocol: the self-test of
``--store`` on CrewAI (a store that keeps pending feedback, so a paused flow resumes).

The database is ``workdir/flows.db`` (an absolute path: the CrewAI case changes its working
directory).  Clone: the file, byte for byte.  Tamper(corrupt): the flow's latest
``flow_states`` row and its ``pending_feedback`` row (``from_pending`` reads that copy) get their
state JSON cut in half.  One flow id per tamper (``tamper_scope="thread"``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from adapters.storeprotocol import StoreContext, StoreHandle, TamperTarget

from ._common import copy_tree

FILE = "flows.db"


def _corrupt(path: Path, target: TamperTarget) -> str:
    conn = sqlite3.connect(str(path), timeout=60)
    try:
        with conn:
            n = conn.execute(
                "UPDATE flow_states SET state_json = substr(state_json, 1, length(state_json) / 2) "
                "WHERE id = (SELECT MAX(id) FROM flow_states WHERE flow_uuid = ?)",
                (target.thread_id,)).rowcount
            n += conn.execute(
                "UPDATE pending_feedback SET state_json = substr(state_json, 1, "
                "length(state_json) / 2) WHERE flow_uuid = ?", (target.thread_id,)).rowcount
    finally:
        conn.close()
    return f"flow {target.thread_id}: {n} stored state(s) cut in half"


def sqlite_persistence(ctx: StoreContext) -> StoreHandle:
    from crewai.flow.persistence import SQLiteFlowPersistence

    path = Path(ctx.workdir).resolve() / FILE
    return StoreHandle(
        store=SQLiteFlowPersistence(str(path)),
        clone=lambda dest: copy_tree(path.parent, Path(dest.workdir), [FILE]),
        tamper=lambda target: _corrupt(path, target),
        tamper_hows=frozenset({"corrupt"}),
        tamper_scope="thread",
    )


sqlite_persistence.store_name = "crewaisqlite"
sqlite_persistence.store_distribution = "crewai"
sqlite_persistence.store_script = "resumefuzz.stores.scripts.crewai_sqlite:SCRIPT"  # its scripts' store
