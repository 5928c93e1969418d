"""The three checkpoint stores (memory, SQLite file, PostgreSQL database) and what the adapter
does to them directly: list a thread's checkpoints, copy the store, drop it.

It imports only the standard library, LangGraph's savers and psycopg.

Every store lives in (or is named by a file in) the case's ``workdir``, so a fresh worker that
re-opens the case after a SIGKILL finds it again.  PostgreSQL: one database per case, named in
``workdir/postgres.json``; the first ``open`` creates it and owns it (drops it in ``close``);
``drop_postgres(workdir)`` drops it whatever happened to the workers (the engine's cleanup).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import tempfile
import uuid
from contextlib import nullcontext
from pathlib import Path

from adapters import storefactory
from adapters.storeprotocol import TamperTarget

SQLITE_FILE = "checkpoints.sqlite"
PG_FILE = "postgres.json"
PG_DSN_ENV = "RESUMEFUZZ_PG_DSN"
DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
SQLITE_BUSY_TIMEOUT = 60.0  # seconds a racer waits for SQLite's write lock (not a sync sleep)


def write_json(path: Path, doc: dict) -> None:
    """Atomic JSON write: a reader (or a crash) sees the old or the new file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Row:
    """One checkpoint of a thread as stored: ids and the (plain) metadata."""

    __slots__ = ("checkpoint_id", "parent_id", "metadata")

    def __init__(self, checkpoint_id: str, parent_id: str | None, metadata: dict):
        self.checkpoint_id, self.parent_id, self.metadata = checkpoint_id, parent_id, metadata

    def __repr__(self) -> str:
        return f"Row({self.checkpoint_id!r}, parent={self.parent_id!r}, {self.metadata!r})"


def _loads_metadata(raw) -> dict:
    if isinstance(raw, dict):
        return raw
    try:
        doc = json.loads(raw)
    except (TypeError, ValueError, UnicodeDecodeError):
        return {}  # tampered metadata: the row is still listed, untagged
    return doc if isinstance(doc, dict) else {}


# =================================================================================================
# The wrapping saver: forwards everything, and tells a forced race when the head has been read.
# =================================================================================================


def holding_saver(inner, *, tag_metadata: bool = False):
    """Wrap ``inner`` so that ``hold["on_read"]`` (set per run) is called once after the run's
    first ``get_tuple``: the read of the interrupted checkpoint, before anything is written.

    A forced race sets it to ``hooks.race_ready``, which blocks until every racer has read.

    ``tag_metadata`` (custom savers only): hand ``put`` the metadata merged with the call's
    configurable keys (``get_checkpoint_metadata``), as LangGraph's own savers do inside their
    ``put``; the driver finds a branch's checkpoints by that tag, and a saver that forgets the
    merge (LMDBSaver 0.3.1) would otherwise read as empty.  The conformance suite's metadata
    checks are where such a saver shows the gap (docs/stores.md).
    """
    from langgraph.checkpoint.base import BaseCheckpointSaver, get_checkpoint_metadata

    def tagged(config, metadata):
        return get_checkpoint_metadata(config, metadata) if tag_metadata else metadata

    class HoldingSaver(BaseCheckpointSaver):
        def __init__(self, inner):
            super().__init__(serde=inner.serde)
            self.inner = inner
            # a dict, so that copy.copy(self) shares it; "writes": a driver.WriteHold while a
            # run of a ``-barrier`` variant is in progress (each write waits on it first)
            self.hold = {"on_read": None, "writes": None}

        # reads -----------------------------------------------------------------------------
        def get_tuple(self, config):
            saved = self.inner.get_tuple(config)
            ready, self.hold["on_read"] = self.hold["on_read"], None
            if ready is not None:
                ready()
            return saved

        def list(self, config, *, filter=None, before=None, limit=None):
            return self.inner.list(config, filter=filter, before=before, limit=limit)

        def get_delta_channel_history(self, *, config, channels):
            return self.inner.get_delta_channel_history(config=config, channels=channels)

        # writes ----------------------------------------------------------------------------
        def put(self, config, checkpoint, metadata, new_versions):
            held = self.hold["writes"]
            with held.checkpoint(checkpoint) if held is not None else nullcontext():
                return self.inner.put(config, checkpoint, tagged(config, metadata),
                                      new_versions)

        def put_writes(self, config, writes, task_id, task_path=""):
            held = self.hold["writes"]
            with held.task_writes(writes) if held is not None else nullcontext():
                return self.inner.put_writes(config, writes, task_id, task_path)

        def delete_thread(self, thread_id):
            return self.inner.delete_thread(thread_id)

        def get_next_version(self, current, channel):
            return self.inner.get_next_version(current, channel)

        # the async twins (an async saver of a custom store, driven with ainvoke) -------------
        async def aget_tuple(self, config):
            saved = await self.inner.aget_tuple(config)
            ready, self.hold["on_read"] = self.hold["on_read"], None
            if ready is not None:
                ready()  # blocks the loop until every racer has read: nothing else runs here
            return saved

        async def alist(self, config, *, filter=None, before=None, limit=None):
            async for item in self.inner.alist(config, filter=filter, before=before, limit=limit):
                yield item

        async def aput(self, config, checkpoint, metadata, new_versions):
            return await self.inner.aput(config, checkpoint, tagged(config, metadata),
                                         new_versions)

        async def aput_writes(self, config, writes, task_id, task_path=""):
            return await self.inner.aput_writes(config, writes, task_id, task_path)

        async def adelete_thread(self, thread_id):
            return await self.inner.adelete_thread(thread_id)

    return HoldingSaver(inner)


# =================================================================================================
# Stores.
# =================================================================================================


class Store:
    """A saver plus direct access to its storage (listing, copying, dropping)."""

    kind = ""

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.inner = None  # the framework's saver
        self.saver = None  # what the graph is compiled with (HoldingSaver around inner)

    def rows(self, thread_id: str) -> list[Row]:
        """Every checkpoint of ``thread_id`` (root namespace), read without decoding blobs."""
        raise NotImplementedError

    def get_tuple(self, config):
        """The harness's own read of one checkpoint, through the saver."""
        return self.inner.get_tuple(config)

    def clone(self, dest: Path) -> None:
        raise NotImplementedError

    def release(self) -> None:
        """Close connections and files; the store stays."""

    def close(self) -> None:
        """End of the case in this worker: release, and drop what this worker owns."""
        self.release()

    def _wrap(self) -> None:
        self.saver = holding_saver(self.inner)

    def _attach(self, inner) -> None:
        """Make ``inner`` (a saver on a new connection) the store's: the holding wrapper is
        made on first use and repointed after, so a graph compiled with it sees the new one."""
        self.inner = inner
        if self.saver is None:
            self._wrap()
        else:
            self.saver.inner = inner
            self.saver.serde = inner.serde


class MemoryStore(Store):
    """``InMemorySaver``: the store is this process's dicts; it dies with the worker."""

    kind = "memory"

    def __init__(self, workdir: Path):
        super().__init__(workdir)
        from langgraph.checkpoint.memory import InMemorySaver

        self.inner = InMemorySaver()
        self._wrap()

    def rows(self, thread_id: str) -> list[Row]:
        out = []
        for cid, (_, meta, parent) in self.inner.storage.get(thread_id, {}).get("", {}).items():
            try:
                metadata = self.inner.serde.loads_typed(meta)
            except Exception:
                metadata = {}
            out.append(Row(cid, parent, metadata if isinstance(metadata, dict) else {}))
        return out

    def clone(self, dest: Path) -> None:
        raise NotImplementedError("an in-memory store cannot be copied to another process")


class SqliteStore(Store):
    """``SqliteSaver`` on ``workdir/checkpoints.sqlite`` (WAL mode, set by the saver)."""

    kind = "sqlite"

    def __init__(self, workdir: Path):
        super().__init__(workdir)
        self.path = self.workdir / SQLITE_FILE
        self.reopen()

    def reopen(self) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        # As SqliteSaver.from_conn_string builds it, with a longer lock wait for races.
        conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=SQLITE_BUSY_TIMEOUT)
        self._attach(SqliteSaver(conn))

    def rows(self, thread_id: str) -> list[Row]:
        with self.inner.cursor(transaction=False) as cur:
            cur.execute(
                "SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
                "WHERE thread_id = ? AND checkpoint_ns = ''",
                (thread_id,),
            )
            return [Row(c, p, _loads_metadata(m)) for c, p, m in cur.fetchall()]

    def files(self) -> list[Path]:
        return [p for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
                if p.exists()]

    def clone(self, dest: Path) -> None:
        """Byte-for-byte copy of the database file and its -wal/-shm (no checkpointing first:
        the copy is exactly what a crashed process would have left)."""
        # By cp, in a child: closing the files here would drop this process's SQLite locks and
        # let another process's connection delete the WAL under ours (adapters.files
        # .copy_apart; this standalone module may not import it).
        files = [str(path) for path in self.files()]
        if files:
            subprocess.run(["cp", "--", *files, str(dest)], check=True)

    def release(self) -> None:
        try:
            self.inner.conn.close()
        except Exception:
            pass


class PostgresStore(Store):
    """``PostgresSaver`` on one database per case, created by the first ``open``."""

    kind = "postgres"

    def __init__(self, workdir: Path):
        super().__init__(workdir)
        self.owner = False
        record_path = self.workdir / PG_FILE
        if record_path.exists():
            record = json.loads(record_path.read_text())
            self.dbname = record["dbname"]
            if not record.get("claimed"):  # a clone: its first opener owns it
                record["claimed"] = True
                write_json(record_path, record)
                self.owner = True
            if not database_exists(self.dbname):
                raise RuntimeError(
                    f"PostgreSQL database {self.dbname} of {self.workdir} is gone "
                    "(dropped by close() or cleanup): the store is lost"
                )
        else:
            self.dbname = f"rf_lg_{uuid.uuid4().hex[:20]}"
            write_json(record_path, {"dbname": self.dbname, "claimed": True})
            admin_execute(f'CREATE DATABASE "{self.dbname}"')
            self.owner = True
        self.reopen()
        self.inner.setup()

    def reopen(self) -> None:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        # As PostgresSaver.from_conn_string builds it (postgres/__init__.py).
        conn = psycopg.connect(
            dsn_for(self.dbname), autocommit=True, prepare_threshold=0, row_factory=dict_row
        )
        self._attach(PostgresSaver(conn))

    def rows(self, thread_id: str) -> list[Row]:
        with self.inner.conn.cursor() as cur:  # dict rows, autocommit (as the saver opened it)
            cur.execute(
                "SELECT checkpoint_id, parent_checkpoint_id, metadata FROM checkpoints "
                "WHERE thread_id = %s AND checkpoint_ns = ''",
                (thread_id,),
            )
            return [
                Row(r["checkpoint_id"], r["parent_checkpoint_id"], _loads_metadata(r["metadata"]))
                for r in cur.fetchall()
            ]

    def clone(self, dest: Path) -> None:
        """``CREATE DATABASE clone TEMPLATE this``: needs every connection to this one closed,
        ours included (stale backends of killed workers are terminated)."""
        clone = f"rf_lg_{uuid.uuid4().hex[:20]}"
        write_json(Path(dest) / PG_FILE, {"dbname": clone, "claimed": False})
        self.inner.conn.close()
        try:
            admin_execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (self.dbname,),
            )
            admin_execute(f'CREATE DATABASE "{clone}" TEMPLATE "{self.dbname}"')
        finally:
            self.reopen()

    def release(self) -> None:
        try:
            self.inner.conn.close()
        except Exception:
            pass

    def close(self) -> None:
        self.release()
        if self.owner:
            drop_database(self.dbname)


# =================================================================================================
# PostgreSQL administration (the server's maintenance database, through RESUMEFUZZ_PG_DSN).
# =================================================================================================


def admin_dsn() -> str:
    return os.environ.get(PG_DSN_ENV) or DEFAULT_PG_DSN


def dsn_for(dbname: str) -> str:
    from psycopg.conninfo import make_conninfo

    return make_conninfo(admin_dsn(), dbname=dbname)


def admin_execute(sql: str, params=None) -> list:
    import psycopg

    with psycopg.connect(admin_dsn(), autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


def database_exists(dbname: str) -> bool:
    return bool(admin_execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)))


def drop_database(dbname: str) -> None:
    """Drop ``dbname`` if it exists, and make sure it does not appear afterwards.

    A worker killed while its ``CREATE DATABASE`` runs (a crash point, or the campaign's
    deadline cutting an operation short) leaves the server finishing the command: a backend
    notices its client gone only when it next talks to it.  A ``DROP ... IF EXISTS`` in that
    window finds no database (the new one is not committed yet) and the database appears after
    it, for good (seen: one leaked database in 2 of 4 fifteen-second PostgreSQL campaigns,
    before and after the warm spares).  So any backend still creating this database, from
    scratch or as a clone, is terminated first, and waited for: a terminated ``CREATE
    DATABASE`` removes what it had copied."""
    pids = creating(dbname)
    if pids:
        admin_execute("SELECT pg_terminate_backend(pid) FROM unnest(%s::int[]) AS pid", (pids,))
        _wait_gone(pids)
    admin_execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


def creating(dbname: str) -> list:
    """The server's backends running a ``CREATE DATABASE`` of ``dbname`` (from scratch or as
    a clone) right now: their pids, as the server sees them."""
    rows = admin_execute(
        "SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND state = 'active' "
        "AND query ILIKE 'CREATE DATABASE%%' AND position(%s in query) > 0",
        (f'"{dbname}"',))
    return [row[0] for row in rows]


def _wait_gone(pids: list, limit: float = 30.0) -> None:
    """Until the backends ``pids`` have exited (a bounded poll of the server's own view: a
    terminated backend runs its cleanup before it goes)."""
    import time

    deadline = time.monotonic() + limit
    while admin_execute("SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"PostgreSQL backends {pids} still running {limit:.0f} s after "
                               "pg_terminate_backend")
        time.sleep(0.01)


def drop_postgres(workdir: Path) -> bool:
    """Drop the database named in ``workdir/postgres.json`` if it still exists.  Idempotent.
    Returns whether the workdir named a database at all."""
    record_path = Path(workdir) / PG_FILE
    if not record_path.exists():
        return False
    drop_database(json.loads(record_path.read_text())["dbname"])
    return True


class CustomStore(Store):
    """Bring your own store: the saver the factory ``factory_path`` returns (``--store``).

    The factory is called in every worker that opens the case, with the case's ``workdir``
    (``adapters/storefactory.py``, ``docs/stores.md``).  The harness lists a thread's
    checkpoints with the saver's own ``list`` (it knows nothing of the store's layout), and
    copies or tampers the data only through the ``StoreHandle`` callbacks the factory offers.
    An ``async def`` factory builds an async saver: it, the graph (``ainvoke``) and the
    harness's reads all run on one event loop owned by this store.
    """

    kind = "custom"

    def __init__(self, workdir: Path, factory_path: str):
        super().__init__(workdir)
        self.factory = storefactory.load(factory_path)
        self.loop = storefactory.Loop() if self.factory.asynchronous else None
        self.handle = storefactory.open_handle(self.factory, self.workdir, "langgraph", self.loop)
        self.inner = self.handle.store
        self.is_async = self.factory.asynchronous
        self.saver = holding_saver(self.inner, tag_metadata=True)

    def _call(self, func, *args):
        return storefactory.call(self.loop, func, *args)

    def run(self, awaitable):
        """Run a coroutine (``app.ainvoke``) on this store's loop; from any thread."""
        return self.loop.run(awaitable)

    def get_tuple(self, config):
        if self.is_async:
            return self.loop.run(self.inner.aget_tuple(config))
        return self.inner.get_tuple(config)

    def rows(self, thread_id: str) -> list[Row]:
        config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        if self.is_async:
            async def collect():
                return [t async for t in self.inner.alist(config)]
            tuples = self.loop.run(collect())
        else:
            tuples = list(self.inner.list(config))
        out = []
        for t in tuples:
            if t.config["configurable"].get("checkpoint_ns", "") != "":
                continue
            parent = (t.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            meta = t.metadata if isinstance(t.metadata, dict) else {}
            out.append(Row(t.config["configurable"]["checkpoint_id"], parent, meta))
        return out

    def clone(self, dest: Path) -> None:
        if self.handle.clone is None:
            raise NotImplementedError(f"the store factory {self.factory.path} offers no clone")
        self._call(self.handle.clone, storefactory.context(Path(dest), "langgraph"))

    def tamper(self, thread_id: str, checkpoint_id: str, how: str, part=None) -> str:
        if self.handle.tamper is None or how not in self.handle.tamper_hows:
            raise NotImplementedError(f"the store factory {self.factory.path} offers no "
                                      f"tamper {how!r}")
        line = self._call(self.handle.tamper, TamperTarget(how=how, thread_id=thread_id,
                                                           checkpoint_id=checkpoint_id,
                                                           part=part))
        return f"{how}: {line or f'checkpoint {checkpoint_id} damaged by the store factory'}"

    def release(self) -> None:
        if getattr(self, "_released", False):  # idempotent: the loop is gone after the first
            return
        self._released = True
        try:
            self._call(self.handle.close)
        except Exception:
            pass
        if self.loop is not None:
            self.loop.stop()

    def cleanup(self) -> None:
        self._call(self.handle.cleanup)


STORES = {"memory": MemoryStore, "sqlite": SqliteStore, "postgres": PostgresStore}


def open_store(kind: str, workdir: Path, factory: str | None = None) -> Store:
    if kind == "custom":
        return CustomStore(Path(workdir), factory)
    return STORES[kind](Path(workdir))
