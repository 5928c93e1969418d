"""A store author's savers, for ``test_langgraph_store_cli.py`` (loaded by ``--store``, in a
fresh interpreter): a correct one (LangGraph's own ``SqliteSaver`` standing in for theirs) and two
with a defect of their own, each deterministic so that the test is.  Not collected by itself."""

import sqlite3

from resumefuzz import StoreContext, StoreHandle


def _conn(ctx: StoreContext):
    return sqlite3.connect(str(ctx.workdir / "author.sqlite"), check_same_thread=False,
                           timeout=60)


def correct(ctx: StoreContext) -> StoreHandle:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = _conn(ctx)
    return StoreHandle(store=SqliteSaver(conn), close=conn.close)


def no_interrupts(ctx: StoreContext) -> StoreHandle:
    """Drops the interrupt writes: a pending gate is never stored."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    class NoInterrupts(SqliteSaver):
        def put_writes(self, config, writes, task_id, task_path=""):
            writes = [(c, v) for c, v in writes if c != "__interrupt__"]
            return super().put_writes(config, writes, task_id, task_path)

    conn = _conn(ctx)
    return StoreHandle(store=NoInterrupts(conn), close=conn.close)


def stale(ctx: StoreContext) -> StoreHandle:
    """A lagging replica: a read of a thread's newest checkpoint returns the one before it."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    class Stale(SqliteSaver):
        def get_tuple(self, config):
            if not config["configurable"].get("checkpoint_id"):
                older = list(self.list(config, limit=2))
                if len(older) == 2:
                    return older[1]
            return super().get_tuple(config)

    conn = _conn(ctx)
    return StoreHandle(store=Stale(conn), close=conn.close)


correct.store_name = "correct"
no_interrupts.store_name = "nointerrupts"
stale.store_name = "stale"
