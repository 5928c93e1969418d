"""A store author's test suite: fuzz a LangGraph checkpoint saver with resumefuzz.

This is the complete example of docs/stores.md; CI runs it (tox -e adapter-langgraph).  Put the
same lines in your own tests with your saver in ``make_saver``; run ``pytest`` as usual.  The
saver here is LangGraph's own ``SqliteSaver`` on a file, standing in for yours.
"""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import Phase, settings

import resumefuzz.pytest
from resumefuzz import StoreContext, StoreHandle, TamperTarget

# Your suite's Hypothesis profile decides the budget, the database, derandomization and the
# phases.  This one is small so that the example runs in a few minutes in CI: few examples, and
# no shrinking (a failure then reports the trace as found; drop `phases=` for minimal traces,
# which costs minutes per failure with real frameworks in worker processes).
settings.register_profile("my-saver", max_examples=6, stateful_step_count=6,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate])
settings.load_profile("my-saver")


def make_saver(ctx: StoreContext) -> StoreHandle:
    """Called in every worker process that opens a test case.  The same ``ctx.workdir`` must
    reopen the same data: here a SQLite file inside it."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = ctx.workdir / "my.sqlite"
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=60)

    def clone(dest: StoreContext) -> None:
        """Twin recovery: copy the data so that make_saver(dest) opens an identical store."""
        for suffix in ("", "-wal", "-shm"):
            src = ctx.workdir / f"my.sqlite{suffix}"
            if src.exists():
                (dest.workdir / src.name).write_bytes(src.read_bytes())

    def tamper(target: TamperTarget) -> str:
        """Damage one stored checkpoint directly: bytes the serializer cannot decode."""
        with sqlite3.connect(str(path), timeout=60) as raw:
            raw.execute("UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND "
                        "checkpoint_ns = '' AND checkpoint_id = ?",
                        (b"\xc1" * 16, target.thread_id, target.checkpoint_id))
        return f"checkpoint {target.checkpoint_id} overwritten with 0xc1 bytes"

    return StoreHandle(store=SqliteSaver(conn), clone=clone, tamper=tamper,
                       tamper_hows=frozenset({"corrupt"}),
                       tamper_scope="lineage",  # list() decodes every checkpoint of a thread
                       close=conn.close)


make_saver.store_name = "mysaver"  # the variants are called store-mysaver-...


# 1. Hypothesis's idiom: one test per variant (API style, durability, fork spelling).
TestMySaver = resumefuzz.pytest.store_test(
    "langgraph", make_saver, variants=("graph-sync-head-update",), op_timeout=20,
    reports_dir=".resumefuzz/reports", corpus_dir=".resumefuzz/corpus",
).TestCase


# 2. A fixture, when you want to choose the variants test by test.
@pytest.fixture(scope="module")
def fuzz():
    return resumefuzz.pytest.store_test("langgraph", make_saver, op_timeout=20)


def test_time_travel_fork(fuzz):
    fuzz.check("graph-sync-head-travel")
