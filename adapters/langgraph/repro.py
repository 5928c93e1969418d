"""A LangGraph finding as a standalone script: the workflow, the calls the adapter made, the check.

``reproduction(variant, workflow, evidence)`` composes ``adapters.reproduction.script.Script``.
Its workflow is the case's: ``workflow.py``'s ``build_graph`` (``state_schema``, TypedDict or
Pydantic) or ``build_entrypoint`` and ``task_body``, pasted with ``inspect.getsource`` and
built from ``SPEC``, with ``Hooks`` below in the ``Box``: the runtime's crash points and effect.
The functions below are pasted where the calls ``driver.py`` recorded use them
(``graph.invoke(Command(resume='a'), checkpoint('run-1', 2), durability='sync')``): the saver
(memory, SQLite, PostgreSQL, a custom store's ``ScriptStore``: docs/stores.md), a forced race's
held first read (``HeldReads``), the tampers of ``tamper.py`` on the SQLite file, the
InMemorySaver (``*_in_memory``) and PostgreSQL (``*_in_postgres``), ``checkpoint`` (a
checkpoint by its position in its thread), ``outcome`` and ``read_state``.  None where no
script checks the finding: a tamper of a custom store, a factory without a ``ScriptStore``, an
operation the script cannot write; the report then gives the replay line.
"""

from __future__ import annotations

import ast
import atexit
import functools
import inspect
import os
import re
import sqlite3
import uuid
from dataclasses import dataclass, replace

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Interrupt

try:  # the PostgreSQL saver's parts (not installed beside every custom store)
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
except ImportError:  # pragma: no cover
    psycopg = dict_row = None
    PostgresSaver = type("PostgresSaver", (), {})  # a stand-in, so HeldPostgresSaver is defined

from adapters.reproduction.runtime import WORKDIR, crash_point, effect
from adapters.reproduction.script import Script, check_for, header, pins, source_as, step_of, \
    thread_label, unwritten

from . import workflow as wf
from .workflow import GATE_KEY

PINNED = ("langgraph", "langgraph-checkpoint")
SAVER_PINNED = {"sqlite": ("langgraph-checkpoint-sqlite",),
                "postgres": ("langgraph-checkpoint-postgres", "psycopg")}
SUPPORTED_OPS = {"start", "resume", "recover", "twin_recover", "fork", "query", "race", "tamper",
                 "stale_resume"}
BAD_OUTPUT = None  # the script's own line sets it: the task that writes outside the schema


# -- what the script contains --------------------------------------------------------------------


class Hooks:
    """What each task does around its body (``task_body``): the crash points before and after
    its one effect, the effect, and the output it writes into the state."""

    def task_begins(self, t):
        crash_point(t, "before its effect")

    def effect(self, t, value):
        effect(t, value)
        crash_point(t, "after its effect")

    def output(self, t, value):
        return "<bad>" if t == BAD_OUTPUT else t


SQLITE_SAVER = "SqliteSaver(sqlite3.connect(DB, check_same_thread=False))"  # how a script builds it


class HeldReads:
    """A saver whose first read in this process waits at ``HOLD`` until every racer has read:
    all load the interrupted checkpoint before any writes (what a race hits by chance)."""
    waited = False

    def get_tuple(self, config):
        saved = super().get_tuple(config)
        if not self.waited:
            self.waited = True
            HOLD.wait(timeout=60)
        return saved


class AsyncHeldReads:
    """``HeldReads`` of an async saver: the wait blocks this racer's event loop (nothing else)."""
    waited = False

    async def aget_tuple(self, config):
        saved = await super().aget_tuple(config)
        if not self.waited:
            self.waited = True
            HOLD.wait(timeout=60)
        return saved


class HeldSqliteSaver(HeldReads, SqliteSaver):
    pass


class HeldPostgresSaver(HeldReads, PostgresSaver):
    pass


def postgres_saver():
    """A PostgresSaver (as ``PostgresSaver.from_conn_string`` builds it) on ``DATABASE``."""
    conn = psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{DATABASE}", autocommit=True,
                           prepare_threshold=0, row_factory=dict_row)
    return PostgresSaver(conn)


def fresh_database(admin="postgresql://postgres@127.0.0.1:5432/postgres"):
    """A new, empty PostgreSQL database (each run of the script starts from nothing), dropped
    when the script exits."""
    name = "repro_" + os.path.basename(WORKDIR).replace("-", "_").lower()
    psycopg.connect(admin, autocommit=True).execute(f'CREATE DATABASE "{name}"')
    atexit.register(lambda: psycopg.connect(admin, autocommit=True).execute(f'DROP DATABASE "{name}" WITH (FORCE)'))
    return name


def corrupt(config):
    """Overwrite a stored checkpoint and its pending writes, in the SQLite file, with bytes
    that msgpack never decodes (0xc1 is a code it reserves)."""
    args = (b"\xc1" * 16, config["configurable"]["thread_id"], config["configurable"]["checkpoint_id"])
    with sqlite3.connect(DB) as db:  # commits at the end
        db.execute("UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ? AND checkpoint_id = ?", args)
        db.execute("UPDATE writes SET value = ? WHERE thread_id = ? AND checkpoint_id = ? AND type = 'msgpack'", args)


def forge(config, channels):
    """Write, in the SQLite file, state the run never produced into a stored checkpoint: each of
    its ``channels`` now holds the value given (encoded with the saver's own serializer)."""
    stored = graph.checkpointer.get_tuple(config).checkpoint  # read through the API, as stored
    stored["channel_values"].update(channels)
    where = (config["configurable"]["thread_id"], config["configurable"]["checkpoint_id"])
    with sqlite3.connect(DB) as db:  # commits at the end
        db.execute("UPDATE checkpoints SET type = ?, checkpoint = ? WHERE thread_id = ? AND checkpoint_id = ?",
                   (*graph.checkpointer.serde.dumps_typed(stored), *where))


def forge_results(config, done, answers):
    """Write, in the SQLite file, results the run's @task calls never returned into a stored
    checkpoint's pending writes (where the functional API keeps them): task i now returned
    ``done[i - 1]``; a result for a task that never ran is added, results past them deleted."""
    where, serde = (config["configurable"]["thread_id"],
                    config["configurable"]["checkpoint_id"]), graph.checkpointer.serde
    db = sqlite3.connect(DB, isolation_level=None)
    rows = db.execute("SELECT task_id, idx, task_path, type, value FROM writes WHERE thread_id = ? "
                      "AND checkpoint_id = ? AND channel = '__return__'", where).fetchall()
    results = sorted((serde.loads_typed((kind, value))["task"], task_id, idx, path)
                     for task_id, idx, path, kind, value in rows)
    for t, output in enumerate(done, 1):
        _, task_id, idx, path = results[t - 1] if t <= len(results) else \
            (t, f"forged-{t}", 0, "~__pregel_push, forged")
        db.execute("INSERT OR REPLACE INTO writes (thread_id, checkpoint_id, task_id, task_path, "
                   "idx, channel, type, value) VALUES (?, ?, ?, ?, ?, '__return__', ?, ?)",
                   (*where, task_id, path, idx, *serde.dumps_typed(
                       {"task": t, "done": output, "answer": answers.get(t)})))
    for _, task_id, idx, _ in results[len(done):]:
        db.execute("DELETE FROM writes WHERE thread_id = ? AND checkpoint_id = ? AND task_id = ? "
                   "AND idx = ?", (*where, task_id, idx))
    db.close()


def delete_interrupt(config, gate):
    """Delete, in the SQLite file, LangGraph's record that gate ``gate`` waits for an answer:
    the stored checkpoint's pending interrupt writes that ask for it."""
    where, serde = (config["configurable"]["thread_id"],
                    config["configurable"]["checkpoint_id"]), graph.checkpointer.serde
    with sqlite3.connect(DB) as db:  # commits at the end
        rows = db.execute("SELECT task_id, idx, type, value FROM writes WHERE thread_id = ? AND "
                          "checkpoint_id = ? AND channel = '__interrupt__'", where).fetchall()
        for task_id, idx, kind, value in rows:
            if {GATE_KEY: gate} in [i.value for i in serde.loads_typed((kind, value))]:
                db.execute("DELETE FROM writes WHERE thread_id = ? AND checkpoint_id = ? AND "
                           "task_id = ? AND idx = ?", (*where, task_id, idx))


def add_interrupt(config, gate):
    """Add, in the SQLite file, a record that gate ``gate`` waits for an answer to a stored
    checkpoint's pending writes: an interrupt write (index -3) of a task LangGraph never ran."""
    where = (config["configurable"]["thread_id"], config["configurable"]["checkpoint_id"])
    asked = graph.checkpointer.serde.dumps_typed(
        (Interrupt(value={GATE_KEY: gate}, id=uuid.uuid4().hex),))
    with sqlite3.connect(DB) as db:  # commits at the end
        db.execute("INSERT INTO writes (thread_id, checkpoint_id, task_id, task_path, idx, "
                   "channel, type, value) VALUES (?, ?, ?, '~__pregel_pull, forged', -3, "
                   "'__interrupt__', ?, ?)", (*where, str(uuid.uuid4()), *asked))


def drop(config):
    """Delete, in the SQLite file, a stored checkpoint and its pending writes: the thread rolls
    back to the checkpoint before it, as if the newest one had never been written."""
    where = (config["configurable"]["thread_id"], config["configurable"]["checkpoint_id"])
    with sqlite3.connect(DB) as db:  # commits at the end
        db.execute("DELETE FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?", where)
        db.execute("DELETE FROM writes WHERE thread_id = ? AND checkpoint_id = ?", where)


def truncate(half):
    """Cut the SQLite file as a torn write or a lost block leaves it, with the application
    down: its connection folds the write-ahead log into the file and closes, the file is cut to
    half its size (or to nothing), and the application, started again, opens it anew."""
    try:
        graph.checkpointer.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.DatabaseError:  # cut before: a malformed file has no log to fold
        pass
    graph.checkpointer.conn.close()
    with open(DB, "r+b") as f:
        f.truncate(os.path.getsize(DB) // 2 if half else 0)
    for leftover in (DB + "-wal", DB + "-shm"):
        if os.path.exists(leftover):
            os.remove(leftover)
    graph.checkpointer = SqliteSaver(sqlite3.connect(DB, check_same_thread=False))


def corrupt_in_memory(config):
    """Overwrite a checkpoint the InMemorySaver holds, the channel values it points to and its
    pending writes with bytes msgpack never decodes (0xc1 is a code it reserves)."""
    saver, thread, cid = graph.checkpointer, config["configurable"]["thread_id"], \
        config["configurable"]["checkpoint_id"]
    typed, metadata, parent = saver.storage[thread][""][cid]
    saver.storage[thread][""][cid] = ((typed[0], b"\xc1" * 16), metadata, parent)
    for channel, version in saver.serde.loads_typed(typed)["channel_versions"].items():
        kind, _ = saver.blobs.get((thread, "", channel, version), ("empty", b""))
        if kind != "empty":
            saver.blobs[(thread, "", channel, version)] = (kind, b"\xc1" * 16)
    writes = saver.writes.get((thread, "", cid), {})
    for key, (task_id, channel, (kind, _), path) in list(writes.items()):
        writes[key] = (task_id, channel, (kind, b"\xc1" * 16), path)


def forge_in_memory(config, channels):
    """Write, in the InMemorySaver, state the run never produced into a stored checkpoint: each
    of its ``channels`` now holds the value given (encoded with the saver's own serializer)."""
    saver, thread, cid = graph.checkpointer, config["configurable"]["thread_id"], \
        config["configurable"]["checkpoint_id"]
    typed, metadata, parent = saver.storage[thread][""][cid]
    stored = saver.serde.loads_typed(typed)
    for channel, value in channels.items():
        version = stored["channel_versions"].setdefault(channel, f"forged.{channel}")
        saver.blobs[(thread, "", channel, version)] = saver.serde.dumps_typed(value)
    saver.storage[thread][""][cid] = (saver.serde.dumps_typed(stored), metadata, parent)


def forge_results_in_memory(config, done, answers):
    """``forge_results`` in the InMemorySaver: task i now returned ``done[i - 1]``."""
    saver, thread, cid = graph.checkpointer, config["configurable"]["thread_id"], \
        config["configurable"]["checkpoint_id"]
    writes = saver.writes[(thread, "", cid)]
    results = sorted((saver.serde.loads_typed(typed)["task"], key, path)
                     for key, (_, channel, typed, path) in writes.items() if channel == "__return__")
    for t, output in enumerate(done, 1):
        _, (task_id, idx), path = results[t - 1] if t <= len(results) else \
            (t, (f"forged-{t}", 0), "~__pregel_push, forged")
        writes[(task_id, idx)] = (task_id, "__return__", saver.serde.dumps_typed(
            {"task": t, "done": output, "answer": answers.get(t)}), path)
    for _, key, _ in results[len(done):]:
        del writes[key]


def delete_interrupt_in_memory(config, gate):
    """``delete_interrupt`` in the InMemorySaver: gate ``gate`` no longer waits."""
    saver, thread, cid = graph.checkpointer, config["configurable"]["thread_id"], \
        config["configurable"]["checkpoint_id"]
    writes = saver.writes.get((thread, "", cid), {})
    for key, (_, channel, typed, _) in list(writes.items()):
        if channel == "__interrupt__" and {GATE_KEY: gate} in [
                i.value for i in saver.serde.loads_typed(typed)]:
            del writes[key]


def add_interrupt_in_memory(config, gate):
    """``add_interrupt`` in the InMemorySaver: gate ``gate`` now waits for an answer."""
    saver, thread, cid = graph.checkpointer, config["configurable"]["thread_id"], \
        config["configurable"]["checkpoint_id"]
    task_id, asked = str(uuid.uuid4()), (Interrupt(value={GATE_KEY: gate}, id=uuid.uuid4().hex),)
    saver.writes[(thread, "", cid)][(task_id, -3)] = (
        task_id, "__interrupt__", saver.serde.dumps_typed(asked), "~__pregel_pull, forged")


def corrupt_in_postgres(config):
    """``corrupt`` in PostgreSQL: the channel blobs a stored checkpoint points to (its row is
    JSON; the values live in ``checkpoint_blobs``) and its pending writes hold bytes msgpack
    never decodes (0xc1 is a code it reserves)."""
    db, thread, cid = graph.checkpointer.conn, config["configurable"]["thread_id"], \
        config["configurable"]["checkpoint_id"]
    stored = db.execute("SELECT checkpoint FROM checkpoints WHERE thread_id = %s AND "
                        "checkpoint_id = %s", (thread, cid)).fetchone()["checkpoint"]
    for channel, version in stored["channel_versions"].items():
        db.execute("UPDATE checkpoint_blobs SET blob = %s WHERE thread_id = %s AND channel = %s "
                   "AND version = %s AND type <> 'empty'", (b"\xc1" * 16, thread, channel, str(version)))
    db.execute("UPDATE checkpoint_writes SET blob = %s WHERE thread_id = %s AND checkpoint_id = %s "
               "AND type = 'msgpack'", (b"\xc1" * 16, thread, cid))


def forge_in_postgres(config, channels):
    """``forge`` in PostgreSQL: each of ``channels`` of a stored checkpoint now holds the value
    given, a channel blob encoded with the saver's own serializer (a channel never written gets
    a version of its own)."""
    from psycopg.types.json import Jsonb

    db, thread, cid = graph.checkpointer.conn, config["configurable"]["thread_id"], \
        config["configurable"]["checkpoint_id"]
    stored = db.execute("SELECT checkpoint FROM checkpoints WHERE thread_id = %s AND "
                        "checkpoint_id = %s", (thread, cid)).fetchone()["checkpoint"]
    for channel, value in channels.items():
        version = str(stored["channel_versions"].setdefault(channel, f"forged.{channel}"))
        db.execute("INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, "
                   "blob) VALUES (%s, '', %s, %s, %s, %s) ON CONFLICT (thread_id, checkpoint_ns, "
                   "channel, version) DO UPDATE SET type = EXCLUDED.type, blob = EXCLUDED.blob",
                   (thread, channel, version, *graph.checkpointer.serde.dumps_typed(value)))
        stored.get("channel_values", {}).pop(channel, None)
    db.execute("UPDATE checkpoints SET checkpoint = %s WHERE thread_id = %s AND checkpoint_id = %s",
               (Jsonb(stored), thread, cid))


def put_write_in_postgres(config, task_id, idx, channel, value, path):
    """Write (or replace) one pending write of a stored checkpoint in PostgreSQL."""
    db, serde = graph.checkpointer.conn, graph.checkpointer.serde
    db.execute("INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
               "task_path, idx, channel, type, blob) VALUES (%s, '', %s, %s, %s, %s, %s, %s, %s) "
               "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE "
               "SET channel = EXCLUDED.channel, type = EXCLUDED.type, blob = EXCLUDED.blob",
               (config["configurable"]["thread_id"], config["configurable"]["checkpoint_id"],
                task_id, path, idx, channel, *serde.dumps_typed(value)))


def forge_results_in_postgres(config, done, answers):
    """``forge_results`` in PostgreSQL: task i now returned ``done[i - 1]``."""
    db, serde, where = graph.checkpointer.conn, graph.checkpointer.serde, \
        (config["configurable"]["thread_id"], config["configurable"]["checkpoint_id"])
    rows = db.execute("SELECT task_id, idx, task_path, type, blob FROM checkpoint_writes WHERE "
                      "thread_id = %s AND checkpoint_id = %s AND channel = '__return__'", where)
    results = sorted((serde.loads_typed((r["type"], bytes(r["blob"])))["task"], r["task_id"],
                      r["idx"], r["task_path"]) for r in rows.fetchall())
    for t, output in enumerate(done, 1):
        _, task_id, idx, path = results[t - 1] if t <= len(results) else \
            (t, f"forged-{t}", 0, "~__pregel_push, forged")
        put_write_in_postgres(config, task_id, idx, "__return__",
                              {"task": t, "done": output, "answer": answers.get(t)}, path)
    for _, task_id, idx, _ in results[len(done):]:
        db.execute("DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_id = %s AND "
                   "task_id = %s AND idx = %s", (*where, task_id, idx))


def delete_interrupt_in_postgres(config, gate):
    """``delete_interrupt`` in PostgreSQL: gate ``gate`` no longer waits."""
    db, serde, where = graph.checkpointer.conn, graph.checkpointer.serde, \
        (config["configurable"]["thread_id"], config["configurable"]["checkpoint_id"])
    rows = db.execute("SELECT task_id, idx, type, blob FROM checkpoint_writes WHERE thread_id = %s "
                      "AND checkpoint_id = %s AND channel = '__interrupt__'", where).fetchall()
    for r in rows:
        if {GATE_KEY: gate} in [i.value for i in serde.loads_typed((r["type"], bytes(r["blob"])))]:
            db.execute("DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_id = %s "
                       "AND task_id = %s AND idx = %s", (*where, r["task_id"], r["idx"]))


def add_interrupt_in_postgres(config, gate):
    """``add_interrupt`` in PostgreSQL: gate ``gate`` now waits for an answer."""
    put_write_in_postgres(config, str(uuid.uuid4()), -3, "__interrupt__",
                          (Interrupt(value={GATE_KEY: gate}, id=uuid.uuid4().hex),),
                          "~__pregel_pull, forged")


def drop_in_postgres(config):
    """``drop`` in PostgreSQL: the stored checkpoint and its pending writes deleted."""
    where = (config["configurable"]["thread_id"], config["configurable"]["checkpoint_id"])
    graph.checkpointer.conn.execute("DELETE FROM checkpoints WHERE thread_id = %s AND "
                                    "checkpoint_id = %s", where)
    graph.checkpointer.conn.execute("DELETE FROM checkpoint_writes WHERE thread_id = %s AND "
                                    "checkpoint_id = %s", where)


@functools.cache  # a position names one checkpoint for good: read before a tamper breaks the list
def checkpoint(thread_id, k):
    """The config of the k-th checkpoint LangGraph saved in this thread (0: the first)."""
    return list(graph.get_state_history({"configurable": {"thread_id": thread_id}}))[::-1][k].config


async def gathered(items):
    """An async iterator's items, as a list (``aget_state_history``)."""
    return [item async for item in items]


@functools.cache
def checkpoint_awaited(thread_id, k):
    """``checkpoint`` of a graph driven with an async saver, on the script's event loop."""
    history = run(gathered(graph.aget_state_history({"configurable": {"thread_id": thread_id}})))
    return history[::-1][k].config



def outcome(result):
    return "interrupted" if isinstance(result, dict) and "__interrupt__" in result else "completed"


def read_state(snapshot):
    """Tasks done, answers and the pending interrupt, as the snapshot has them."""
    values = snapshot.values if snapshot is not None and isinstance(snapshot.values, dict) else {}
    pending = [i.value[GATE_KEY] for i in snapshot.interrupts] if snapshot is not None else []
    return {"done": sorted(values.get("done", []), key=repr),
            "answers": {str(t): v for t, v in values.get("answers", {}).items()},
            "pending": pending[0] if pending else None}


def read_state_of_tasks(snapshot):
    """``read_state`` of the functional API: the results its @task calls stored count too (the
    checkpoint's pending writes, which a resume reuses), unless the thread has moved past the
    checkpoint (a resume there reruns its finished tasks)."""
    if snapshot is None:
        return {"done": [], "answers": {}, "pending": None}
    values = snapshot.values if isinstance(snapshot.values, dict) else {}
    done, answers = list(values.get("done", [])), dict(values.get("answers", {}))
    thread = {"configurable": {"thread_id": snapshot.config["configurable"]["thread_id"]}}
    saved = graph.checkpointer.get_tuple(snapshot.config)  # None: nothing stored
    if saved and graph.get_state(thread).config == snapshot.config:  # the thread's newest
        for _, channel, result in saved.pending_writes:
            if (channel == "__return__" and isinstance(result, dict) and "task" in result
                    and result["done"] not in done):
                done.append(result["done"])
                if result["answer"] is not None:
                    answers[result["task"]] = result["answer"]
    pending = [i.value[GATE_KEY] for i in snapshot.interrupts]
    return {"done": sorted(done, key=repr), "answers": {str(t): v for t, v in answers.items()},
            "pending": pending[0] if pending else None}

# -- composing it ----------------------------------------------------------------------------------

# The definitions a script may need beyond its workflow and its saver, pasted where its calls
# (or another pasted definition) use them.
HELPERS = (corrupt, forge, forge_results, delete_interrupt, add_interrupt, drop, truncate,
           corrupt_in_memory, forge_in_memory, forge_results_in_memory, delete_interrupt_in_memory,
           add_interrupt_in_memory, corrupt_in_postgres, forge_in_postgres, put_write_in_postgres,
           forge_results_in_postgres, delete_interrupt_in_postgres, add_interrupt_in_postgres,
           drop_in_postgres, checkpoint, gathered, outcome, read_state)


def _source(*objects) -> str:
    """The objects' source; a string is source already (a custom store's)."""
    return "\n\n".join(o if isinstance(o, str) else inspect.getsource(o).rstrip() for o in objects)


def _calls(name: str, source: str) -> bool:
    return re.search(rf"(?<![\w.]){name}\(", source) is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Saver:
    """How the script builds its saver (``expr``; ``held``: its first read waits for the other
    racers); ``asynchronous``: driven with ``ainvoke`` on the script's event loop (``run``)."""

    expr: str
    held: str
    definitions: tuple
    setup: tuple
    imports: tuple
    stdlib: tuple
    pinned: tuple
    asynchronous: bool = False
    teardown: tuple = ()
    cls: str = ""  # a custom store's class, as the script imports it (``PyMySQLSaver``)


def saver_for(options, forced: bool) -> Saver | None:
    """LangGraph's own saver (memory, SQLite in the script's ``WORKDIR``, PostgreSQL), or a
    custom store's as its factory's ``ScriptStore`` builds it (None when it declares none)."""
    kind = options["saver"]
    if kind == "memory":
        return Saver(expr="InMemorySaver()", held="", definitions=(), setup=(), stdlib=(), pinned=(),
                     imports=("from langgraph.checkpoint.memory import InMemorySaver",))
    if kind == "sqlite":
        return Saver(
            expr=SQLITE_SAVER, held="Held" + SQLITE_SAVER,
            definitions=(HeldReads, HeldSqliteSaver) if forced else (),
            setup=('DB = os.path.join(WORKDIR, "checkpoints.sqlite")  # the SqliteSaver\'s file',),
            imports=("from langgraph.checkpoint.sqlite import SqliteSaver",),
            stdlib=("os", "sqlite3"), pinned=SAVER_PINNED[kind])
    if kind == "postgres":
        held = (HeldReads, HeldPostgresSaver) if forced else ()
        return Saver(
            expr="postgres_saver()", held="HeldPostgresSaver(postgres_saver().conn)",
            definitions=(postgres_saver, fresh_database, *held),
            setup=("DATABASE = fresh_database()", "postgres_saver().setup()  # the saver's tables"),
            imports=("import psycopg", "from psycopg.rows import dict_row",
                     "from langgraph.checkpoint.postgres import PostgresSaver"),
            stdlib=("atexit", "os"), pinned=SAVER_PINNED[kind])
    from adapters import storefactory
    from adapters.reproduction.script import store_class, store_parts

    factory = storefactory.load(options["store_factory"])
    recipe = storefactory.script_of(factory)
    if recipe is None:
        return None
    stdlib, imports, source = store_parts(recipe)
    awaited = inspect.iscoroutinefunction(recipe.builder)
    call = (lambda arg="": f"run({recipe.build}({arg}))") if awaited else \
        (lambda arg="": f"{recipe.build}({arg})")
    definitions = [source]
    if forced:
        holding = AsyncHeldReads if factory.asynchronous else HeldReads
        definitions += [holding, f"class HeldSaver({holding.__name__}, {store_class(recipe)}):\n"
                                 "    pass"]
    return Saver(expr=call(), held=call("HeldSaver"), definitions=tuple(definitions),
                 setup=(), imports=imports,
                 stdlib=tuple(stdlib) + (("asyncio",) if factory.asynchronous else ()),
                 pinned=tuple(recipe.distributions), asynchronous=factory.asynchronous,
                 teardown=tuple(recipe.close), cls=store_class(recipe))


def reproduction(variant, workflow, evidence) -> str | None:
    options = dict(variant.options)
    if (options.get("saver") not in ("memory", "sqlite", "postgres", "custom")
            or (options["saver"] == "custom" and any(op.name == "tamper" for op in evidence.ops))
            or any(op.name not in SUPPORTED_OPS for op in evidence.ops[: evidence.step + 1])):
        return None
    ops = evidence.ops[: evidence.step + 1]
    forced = next((len(op.values) for op in ops if op.name == "race" and op.forced), 0)
    if forced and options["saver"] == "memory":
        return None  # each racer has its own copy of the parent's memory: nothing to race on
    saver = saver_for(options, bool(forced))
    check = check_for(evidence, state_readable=True, outcome_readable=ops[-1].name != "race")
    if saver is None or check is None:
        return None
    graph_api = options["api"] == "graph"
    if saver.asynchronous and not graph_api and check.reads_state:
        return None  # read_state_of_tasks reads the saver synchronously: not written yet
    build = wf.build_graph if graph_api else wf.build_entrypoint
    awaited = _awaited if saver.asynchronous else (lambda src: src)
    steps = []
    for i, op in enumerate(ops):
        calls = [awaited(src) for kind, src in evidence.calls[i] if kind == "call"]
        reads = [awaited(src) for kind, src in evidence.calls[i] if kind == "read"]
        if unwritten(calls + reads):
            return None  # a checkpoint the script cannot name
        if op.name not in ("query", "race") and not calls:
            return None  # the adapter failed before any framework call: nothing to repeat
        racers = ()
        if op.name == "race":
            if len(calls) != len(op.values):
                return None  # a racer that made no call, or more than one
            racers, calls = tuple((c,) for c in calls), []
        held = op.name == "race" and op.forced
        steps.append(step_of(
            evidence, i, calls if op.name != "query" else (),  # a read: the check does it
            racers=racers, child_setup=_child_setup(options, saver, build.__name__, held)))
        if i == evidence.step and check.aspect == "state":
            check = replace(check, state_src=f"read_state({reads[-1] if reads else 'None'})")
    calls = "\n".join([*(c for s in steps for c in (*s.calls, *sum(s.racers, ()))),
                       check.state_src, *(["outcome("] if check.reads_outcome else [])])
    helpers = _helpers(calls, saver, graph_api)
    spec = {"n": workflow.n, "gates": set(workflow.gates), "values": list(workflow.values),
            **({"state": options.get("state", "typed")} if graph_api else {})}
    glue = [f"SPEC = {spec!r}",
            *(["BAD_OUTPUT = None  # the task that writes a value outside the schema"]
              if any(s.bad_output is not None for s in steps) and steps[0].bad_output is None
              else []),
            *([f"HOLD = multiprocessing.Barrier({forced})  # the racers' meeting point"]
              if forced else []),
            *saver.setup,
            *(["run = asyncio.new_event_loop().run_until_complete  # the async saver's event loop"]
              if saver.asynchronous else []),
            f"graph = {build.__name__}(SPEC, {saver.expr}, Box(Hooks()))"]
    workflow_src = "\n\n".join(filter(None, [
        f"GATE_KEY = {GATE_KEY!r}  # interrupt({{GATE_KEY: t}}): how a stored interrupt names its gate",
        _source(*([wf.merge_answers, wf.state_schema] if graph_api else []), wf.task_body, build,
                wf.Box, Hooks, *saver.definitions),
        helpers, "\n".join(glue)]))
    # A custom store is named by its class, not by our factory.
    description = re.sub(r"^(async )?saver from \S+ ", lambda m: f"{m[1] or ''}{saver.cls} ",
                         variant.description) if saver.cls else variant.description
    types = [name for name in ("Command", "Interrupt") if _calls(name, calls + "\n" + helpers)]
    return Script(
        header=header("LangGraph", description, evidence, pins(evidence, PINNED + saver.pinned)),
        imports=(*(["from typing import Annotated, Any, Literal"] if graph_api else []),
                 *saver.imports,
                 *([f"from langgraph.types import {', '.join(types)}"] if types else [])),
        workflow_src=workflow_src,
        steps=tuple(steps),
        check=check,
        teardown=saver.teardown,
        stdlib=saver.stdlib
        + (("operator",) if graph_api else ())  # the state's reducer
        + (("multiprocessing",) if forced else ())
        + (("functools",) if "@functools.cache" in helpers else ())
        + (("uuid",) if "uuid." in helpers else ()),  # a forged interrupt's task id
    ).source()


def _helpers(calls: str, saver: Saver, graph_api: bool) -> str:
    """The source of the helpers ``calls`` use, and of those they use in turn (``checkpoint``
    of an async saver and ``read_state`` of the functional API's tasks in their own spelling)."""
    def source(f):
        if f is checkpoint and saver.asynchronous:
            return source_as(checkpoint_awaited, "checkpoint")
        if f is read_state and not graph_api:
            return source_as(read_state_of_tasks, "read_state")
        return _source(f)

    used: dict = {}
    while new := [f for f in HELPERS if f not in used
                  and _calls(f.__name__, "\n".join([calls, *used.values()]))]:
        used.update((f, source(f)) for f in new)
    return "\n\n".join(used[f] for f in HELPERS if f in used)


class _Awaiting(ast.NodeTransformer):
    """``graph.invoke(...)`` -> ``run(graph.ainvoke(...))``, and so for ``update_state`` and
    ``get_state``; ``list(graph.get_state_history(c))`` -> ``run(gathered(graph.aget_state_history(c)))``."""

    METHODS = {"invoke", "update_state", "get_state"}

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if (isinstance(func, ast.Name) and func.id == "list" and len(node.args) == 1
                and _is_graph_call(node.args[0], "get_state_history")):
            inner = node.args[0]
            inner.func.attr = "aget_state_history"
            node = ast.Call(ast.Name("gathered", ast.Load()), [inner], [])
        elif any(_is_graph_call(node, m) for m in self.METHODS):
            node.func.attr = "a" + node.func.attr
        else:
            return node
        return ast.Call(ast.Name("run", ast.Load()), [node], [])


def _is_graph_call(node, method: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == method and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "graph")


def _awaited(source: str) -> str:
    """A recorded call as a script driving an async saver writes it: awaited on ``run``."""
    return ast.unparse(_Awaiting().visit(ast.parse(source)))


def _child_setup(options, saver: Saver, build: str, held: bool) -> tuple:
    """What a child process (a racer, a step that dies) runs first: its own connection."""
    if options["saver"] == "memory":
        return ()  # the child works on its copy of the parent's memory: lost when it dies
    loop = (("global graph, run", "run = asyncio.new_event_loop().run_until_complete")
            if saver.asynchronous else ("global graph",))
    if held:
        return (*loop, f"graph = {build}(SPEC, {saver.held}, Box(Hooks()))"
                       "  # reads, then waits for the others")
    return (*loop, f"graph = {build}(SPEC, {saver.expr}, Box(Hooks()))  # the child's own connection")


__all__ = ["reproduction", "thread_label"]
