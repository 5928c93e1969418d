"""A LangGraph finding as a short script: the workflow, the calls the adapter made, the check.

``reproduction(variant, workflow, evidence)`` composes ``adapters.reproduction.script.Script`` from
the functions below (pasted into the script by name, with ``inspect.getsource``: each is real
code, importable and tested here) and the calls ``driver.py`` recorded while the engine replayed
the trace (``graph.invoke(Command(resume='a'), checkpoint('run-1', 2), durability='sync')``).
A checkpoint is named by its position in its thread's history (``checkpoint(thread, k)``): its
id differs on every run, its position does not (cached only where a tamper may break the list,
written out where the script names one checkpoint once).

Each script keeps only what its trace uses: the one ``build_graph`` / ``build_entrypoint``
(whose tasks carry every way a trace may make them ask, fail or write outside the schema) loses
the crash points, the out-of-schema output and the ``interrupt`` it does not use, and a script
whose check reads no effect (the outcome or the stored state; no process dies) has no effect log
either: ``Script(lean=True)``.  The SQLite file is ``DB``, the saver built inline.

Written for the memory, SQLite and PostgreSQL savers, both API styles, the TypedDict and the
Pydantic state, every resume and fork spelling, exception and SIGKILL crash points, corrupted,
forged and invalid checkpoints of the SQLite file and of the InMemorySaver (a forgery of the
functional API writes the ``__end__`` channel of a finished run, the ``@task`` results of an
unfinished one: ``forge_results``; a forged part, ``Tamper.part``, then makes the pending
record agree: ``delete_interrupt`` / ``add_interrupt``), out-of-schema outputs and races (a
forced race, where every racer reads before any writes, holds the racers at a
``multiprocessing.Barrier`` in the first ``get_tuple`` of a ``SqliteSaver`` or ``PostgresSaver``
subclass: the interleaving the harness forces, with the saver's public extension point).  A
twin recovery is written as the recovery of the original store, the first of the two the fuzzer
runs (the second, on a copy, runs after it and cannot change it).  The ``trunc*`` variants'
truncation of the SQLite file is ``truncate`` (the application down while the file is cut, then
opened anew, as the harness reopens its store), the ``drophead`` variant's forgery ``drop`` (the
newest checkpoint and its writes deleted).  A PostgreSQL store is tampered with the same edits
on its tables (``*_in_postgres``, SQL on the saver's own connection; a checkpoint's values live
in ``checkpoint_blobs``).  Not (yet): tampers of a custom store; for those the report says so
at the top and gives the replay line.
A custom store (``--store``) is built as its factory's ``ScriptStore`` says (``saver_for``:
the store author's code, pasted; docs/stores.md), an async saver driven with ``ainvoke`` on one
event loop of the script's (``run(graph.ainvoke(...))``); a factory that declares no
``ScriptStore`` gets the older script too.  So does an entry whose recorded observation the
contract now allows (recorded ``FIXED``): no aspect of it tells a defect apart, so there is
nothing to check.
"""

from __future__ import annotations

import ast
import atexit
import functools
import inspect
import operator
import os
import re
import sqlite3
import uuid
from dataclasses import dataclass, replace
from typing import Annotated, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.func import entrypoint, task
from langgraph.graph import START, StateGraph
from langgraph.types import Interrupt, interrupt

try:  # the PostgreSQL saver's parts (not installed beside every custom store)
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row
except ImportError:  # pragma: no cover
    psycopg = dict_row = None
    PostgresSaver = type("PostgresSaver", (), {})  # a stand-in, so HeldPostgresSaver is defined

from adapters.reproduction.runtime import WORKDIR, crash_point, effect
from adapters.reproduction.script import (
    Script,
    check_for,
    header,
    pins,
    source_as,
    step_of,
    thread_label,
    unwritten,
    without_docstring,
)

N, GATES = 2, {1}  # the script's own line sets these: tasks 1..N, the tasks that interrupt
PINNED = ("langgraph", "langgraph-checkpoint")
SAVER_PINNED = {"sqlite": ("langgraph-checkpoint-sqlite",),
                "postgres": ("langgraph-checkpoint-postgres", "psycopg")}
SUPPORTED_OPS = {"start", "resume", "recover", "twin_recover", "fork", "query", "race", "tamper",
                 "stale_resume"}


# -- what the script contains --------------------------------------------------------------------


class State(TypedDict, total=False):
    done: Annotated[list, operator.add]
    answers: Annotated[dict, operator.or_]


def build_graph(checkpointer):
    """One node per task, t1 -> t2 -> ... -> tN.  Task t asks for a value (if it is a gate),
    fires its one effect and writes its number into the state (task ``BAD_OUTPUT``: a string,
    outside the schema), and may be made to fail before or after its effect (``crash_point``).
    A script keeps what its trace uses (``_workflow_source``, ``Script.source``)."""
    def node(t):
        def run(state):
            crash_point(t, "before its effect")
            value = interrupt({"task": t}) if t in GATES else None
            effect(t, value)
            crash_point(t, "after its effect")
            return {"done": ["<bad>" if t == BAD_OUTPUT else t], **({"answers": {t: value}} if value is not None else {})}
        return run
    builder = StateGraph(State).add_sequence([(f"t{t}", node(t)) for t in range(1, N + 1)])
    return builder.add_edge(START, "t1").compile(checkpointer=checkpointer)


def build_entrypoint(checkpointer):
    """An @entrypoint calling one @task per task, each task as in ``build_graph``."""
    @task
    def step(t):
        crash_point(t, "before its effect")
        value = interrupt({"task": t}) if t in GATES else None
        effect(t, value)
        crash_point(t, "after its effect")
        return {"task": t, "done": "<bad>" if t == BAD_OUTPUT else t, "answer": value}

    @entrypoint(checkpointer=checkpointer)
    def graph(inputs):
        results = [step(t).result() for t in range(1, N + 1)]
        return {"done": [r["done"] for r in results],
                "answers": {r["task"]: r["answer"] for r in results if r["answer"] is not None}}
    return graph


DB = os.path.join(WORKDIR, "checkpoints.sqlite")  # the SqliteSaver's file (the script: its own line)
SQLITE_SAVER = "SqliteSaver(sqlite3.connect(DB, check_same_thread=False))"  # how a script builds it


class HeldReads:
    """A saver whose first read in this process waits at ``HOLD`` until every racer has made
    its read: each racer loads the interrupted checkpoint before any of them writes its answer
    (the interleaving a race can hit by chance, here every time)."""
    waited = False

    def get_tuple(self, config):
        saved = super().get_tuple(config)
        if not self.waited:
            self.waited = True
            HOLD.wait(timeout=60)
        return saved


class AsyncHeldReads:
    """``HeldReads`` of an async saver (``aget_tuple``): the wait blocks this racer's event loop,
    which runs nothing else."""
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


def held_postgres_saver():
    return HeldPostgresSaver(postgres_saver().conn)


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
            if {"task": gate} in [i.value for i in serde.loads_typed((kind, value))]:
                db.execute("DELETE FROM writes WHERE thread_id = ? AND checkpoint_id = ? AND "
                           "task_id = ? AND idx = ?", (*where, task_id, idx))


def add_interrupt(config, gate):
    """Add, in the SQLite file, a record that gate ``gate`` waits for an answer to a stored
    checkpoint's pending writes: an interrupt write (index -3) of a task LangGraph never ran."""
    where = (config["configurable"]["thread_id"], config["configurable"]["checkpoint_id"])
    asked = graph.checkpointer.serde.dumps_typed(
        (Interrupt(value={"task": gate}, id=uuid.uuid4().hex),))
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
    global graph
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
    graph = build_graph(SqliteSaver(sqlite3.connect(DB, check_same_thread=False)))


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
        if channel == "__interrupt__" and {"task": gate} in [
                i.value for i in saver.serde.loads_typed(typed)]:
            del writes[key]


def add_interrupt_in_memory(config, gate):
    """``add_interrupt`` in the InMemorySaver: gate ``gate`` now waits for an answer."""
    saver, thread, cid = graph.checkpointer, config["configurable"]["thread_id"], \
        config["configurable"]["checkpoint_id"]
    task_id, asked = str(uuid.uuid4()), (Interrupt(value={"task": gate}, id=uuid.uuid4().hex),)
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
        if {"task": gate} in [i.value for i in serde.loads_typed((r["type"], bytes(r["blob"])))]:
            db.execute("DELETE FROM checkpoint_writes WHERE thread_id = %s AND checkpoint_id = %s "
                       "AND task_id = %s AND idx = %s", (*where, r["task_id"], r["idx"]))


def add_interrupt_in_postgres(config, gate):
    """``add_interrupt`` in PostgreSQL: gate ``gate`` now waits for an answer."""
    put_write_in_postgres(config, str(uuid.uuid4()), -3, "__interrupt__",
                          (Interrupt(value={"task": gate}, id=uuid.uuid4().hex),),
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
    pending = [i.value["task"] for i in snapshot.interrupts] if snapshot is not None else []
    return {"done": sorted(values.get("done", []), key=repr),
            "answers": {str(t): v for t, v in values.get("answers", {}).items()},
            "pending": pending[0] if pending else None}


def read_state_of_snapshot(snapshot):
    """``read_state`` of a StateGraph's snapshot, which the script has (its values a dict)."""
    values, pending = snapshot.values, [i.value["task"] for i in snapshot.interrupts]
    answers = {str(t): v for t, v in values.get("answers", {}).items()}
    return {"done": sorted(values.get("done", []), key=repr), "answers": answers, "pending": (pending or [None])[0]}


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
    pending = [i.value["task"] for i in snapshot.interrupts]
    return {"done": sorted(done, key=repr), "answers": {str(t): v for t, v in answers.items()},
            "pending": pending[0] if pending else None}


# -- composing it ----------------------------------------------------------------------------------


def _source(*objects) -> str:
    """The objects' source without docstrings; a string is source already (a custom store's)."""
    return "\n".join(o if isinstance(o, str) else without_docstring(inspect.getsource(o))
                     for o in objects)


@dataclass(frozen=True, slots=True, kw_only=True)
class Saver:
    """How the script builds its saver: ``expr`` (``sqlite_saver()``), ``held`` (the same saver,
    its first read waiting for the other racers), the definitions they need, the lines run
    before the graph is built, the imports, the pinned distributions; ``asynchronous``: an
    async saver, the graph driven with ``ainvoke`` on the script's one event loop (``run``)."""

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
    """The script's saver for a variant's options: LangGraph's own (memory, SQLite, PostgreSQL),
    or a custom store's (``--store``) as its factory's ``ScriptStore`` builds it (None when the
    factory declares none).  The SQLite file ``DB`` is in the script's ``WORKDIR``, which the
    script removes as it exits."""
    kind = options["saver"]
    if kind != "custom":
        definitions = {"postgres": [postgres_saver, fresh_database]}.get(kind, [])
        if forced:
            definitions += {"sqlite": [HeldReads, HeldSqliteSaver],
                            "postgres": [HeldReads, HeldPostgresSaver, held_postgres_saver]}[kind]
        return Saver(
            expr=_saver(options), held="Held" + SQLITE_SAVER if kind == "sqlite" else
            f"held_{kind}_saver()", definitions=tuple(definitions),
            setup=(("DATABASE = fresh_database()", "postgres_saver().setup()  # the saver's tables")
                   if kind == "postgres" else
                   ('DB = os.path.join(WORKDIR, "checkpoints.sqlite")  # the SqliteSaver\'s file',)
                   if kind == "sqlite" else ()),
            imports=_saver_imports(kind),
            stdlib={"sqlite": ("os", "sqlite3"),
                    "postgres": ("atexit", "os")}.get(kind, ()),
            pinned=SAVER_PINNED.get(kind, ()))
    from adapters import storefactory
    from adapters.reproduction.script import store_class, store_parts

    factory = storefactory.load(options["store_factory"])
    recipe = storefactory.script_of(factory)
    if recipe is None:
        return None
    stdlib, imports, source = store_parts(recipe)
    build = recipe.builder
    awaited = inspect.iscoroutinefunction(build)
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
    if saver is None:
        return None
    check = check_for(evidence, state_readable=True,
                      outcome_readable=ops[-1].name != "race")
    if check is None:
        return None
    if saver.asynchronous and options["api"] != "graph" and check.reads_state:
        return None  # read_state_of_tasks reads the saver synchronously: not written yet
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
        steps.append(step_of(
            evidence, i, calls if op.name != "query" else (),  # a read: the check does it
            racers=racers,
            child_setup=_child_setup(options, saver, held=op.name == "race" and op.forced),
        ))
        if i == evidence.step and check.aspect == "state":
            read = reads[-1] if reads else "None"
            check = _with_state(check, f"read_state({read})")
    calls = " ".join(c for step in steps for c in (*step.calls, *sum(step.racers, ())))
    calls += " " + check.state_src
    if len(_CHECKPOINT.findall(calls)) == 1:  # named once: written out where it is used
        inline = functools.partial(_inline_checkpoint, asynchronous=saver.asynchronous)
        steps = [replace(s, calls=tuple(map(inline, s.calls)),
                         racers=tuple(tuple(map(inline, r)) for r in s.racers)) for s in steps]
        check, calls = _with_state(check, inline(check.state_src)), inline(calls)
    build = build_graph if options["api"] == "graph" else build_entrypoint
    bad = any(s.bad_output is not None for s in steps)
    glue = [f"N, GATES = {workflow.n}, {set(workflow.gates)}" if workflow.gates else
            f"N = {workflow.n}",
            *(["BAD_OUTPUT = None  # a task that writes a value outside the schema"]
              if bad and steps[0].bad_output is None else []),
            *([f"HOLD = multiprocessing.Barrier({forced})  # the racers' meeting point"]
              if forced else []),
            *saver.setup,
            *(["run = asyncio.new_event_loop().run_until_complete  # the async saver's event loop"]
              if saver.asynchronous else []),
            f"graph = {build.__name__}({saver.expr})"]
    pydantic = options["api"] == "graph" and options.get("state", "typed") == "pydantic"
    parts = [State] if options["api"] == "graph" and not pydantic else []
    readers = [f for f in (corrupt, drop, truncate, forge, forge_results, delete_interrupt,
                          add_interrupt, corrupt_in_memory, forge_in_memory, forge_results_in_memory,
                          delete_interrupt_in_memory, add_interrupt_in_memory,
                          corrupt_in_postgres, forge_in_postgres, put_write_in_postgres,
                          forge_results_in_postgres, delete_interrupt_in_postgres,
                          add_interrupt_in_postgres, drop_in_postgres, checkpoint,
                          outcome, read_state)
               if f.__name__ + "(" in calls
               or (f is outcome and check.aspect == "outcome")
               # the helper of the two that add a pending write
               or (f is put_write_in_postgres and re.search(
                   r"\b(add_interrupt|forge_results)_in_postgres\(", calls) is not None)]
    # A position names one checkpoint for good, unless a tamper breaks the thread's list:
    # only then is the list read once per position (cached).
    cached = checkpoint in readers and any(op.name == "tamper" for op in ops)
    reader_src = "\n".join(_reader_source(f, options, saver, cached, check.state_src)
                           for f in readers)
    if saver.asynchronous and "gathered(" in calls and "async def gathered" not in reader_src:
        reader_src = _source(gathered) + "\n" + reader_src
    workflow_src = "\n".join([*([pydantic_state(workflow.values)] if pydantic else []),
                              _source(*parts, build, *saver.definitions),
                              *([reader_src] if reader_src else []), *glue])
    if not workflow.gates:
        workflow_src = _gateless(workflow_src)
    description = variant.description
    if options["saver"] == "custom":  # the script names the store's class, not our factory
        description = re.sub(r"^(async )?saver from \S+ ", lambda m: f"{m[1] or ''}"
                             f"{saver.cls} ", description)
    return Script(
        header=header("LangGraph", description, evidence, pins(evidence, PINNED + saver.pinned)),
        imports=_imports(options, "Command(" in calls, asks=bool(workflow.gates),
                         saver=saver.imports, forges_asks="add_interrupt" in calls),
        workflow_src=workflow_src,
        steps=tuple(steps),
        check=check,
        teardown=saver.teardown,
        stdlib=saver.stdlib
        + (("multiprocessing",) if forced else ())
        + (("functools",) if cached else ())
        + (("uuid",) if "add_interrupt" in calls else ())  # the forged interrupt's task id
        + (("operator",) if options["api"] == "graph" else ()),  # the state's reducers
        lean=True,
        raise_passes=True,  # a node's (a @task's) exception reaches invoke()'s caller as it is
    ).source()


def _reader_source(f, options, saver: Saver, cached: bool, state_src: str) -> str:
    """The source of reader ``f`` as this script needs it: ``checkpoint`` uncached where no
    tamper follows (``cached``) and awaited for an async saver, ``read_state`` of the functional
    API's tasks, or of a StateGraph's snapshot (not None)."""
    if f is checkpoint:
        src = (_source(gathered) + "\n" + source_as(checkpoint_awaited, "checkpoint")
               if saver.asynchronous else _source(checkpoint))
        return src if cached else "\n".join(
            line for line in src.splitlines() if not line.startswith("@functools.cache"))
    if f is read_state and options["api"] != "graph":
        return source_as(read_state_of_tasks, "read_state")
    if f is read_state and state_src != "read_state(None)":
        return source_as(read_state_of_snapshot, "read_state")
    if f is truncate and options["api"] != "graph":
        return _source(f).replace("build_graph(", "build_entrypoint(")
    return _source(f)


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
            return _run(ast.Call(ast.Name("gathered", ast.Load()), [inner], []))
        if any(_is_graph_call(node, m) for m in self.METHODS):
            node.func.attr = "a" + node.func.attr
            return _run(node)
        return node


def _is_graph_call(node, method: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == method and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "graph")


def _run(node):
    return ast.Call(ast.Name("run", ast.Load()), [node], [])


def _awaited(source: str) -> str:
    """A recorded call as a script driving an async saver writes it: awaited on ``run``."""
    return ast.unparse(_Awaiting().visit(ast.parse(source)))


def _with_state(check, state_src):
    from dataclasses import replace

    return replace(check, state_src=state_src)


def _saver(options) -> str:
    return {"sqlite": SQLITE_SAVER, "postgres": "postgres_saver()"}.get(options["saver"],
                                                                          "InMemorySaver()")


def _child_setup(options, saver: Saver, held: bool = False) -> tuple:
    if options["saver"] == "memory":
        return ()  # the child works on its copy of the parent's memory: lost when it dies
    build = "build_graph" if options["api"] == "graph" else "build_entrypoint"
    loop = (("global graph, run", "run = asyncio.new_event_loop().run_until_complete")
            if saver.asynchronous else ("global graph",))
    if held:
        return (*loop, f"graph = {build}({saver.held})  # reads, then waits for the others")
    return (*loop, f"graph = {build}({saver.expr})  # the child's own connection")


def pydantic_state(values) -> str:
    """The ``-pydantic`` variants' state: a Pydantic model whose answers may only be one of the
    workflow's values (the shape of langgraph issue #6491)."""
    return "\n".join([
        "class State(BaseModel):",
        "    done: Annotated[list[int], operator.add] = []",
        f"    answers: Annotated[dict[int, Literal[{', '.join(map(repr, values))}]], operator.or_] = {{}}",
    ])


def _gateless(source: str) -> str:
    """The tasks of a workflow without gates: nothing asks (no ``interrupt``), the effect's
    value and the answer are ``None`` (a StateGraph node writes no answer)."""
    ask = "value = interrupt({\"task\": t}) if t in GATES else None"
    lines = [line for line in source.splitlines() if line.strip() != ask]
    out = "\n".join(lines).replace("effect(t, value)", "effect(t, None)")
    out = out.replace(', **({"answers": {t: value}} if value is not None else {})}', "}")
    return out.replace('"answer": value}', '"answer": None}')


_CHECKPOINT = re.compile(r"(?<![\w.])checkpoint\(('[^']*'), (\d+)\)")


def _inline_checkpoint(src: str, asynchronous: bool) -> str:
    """``checkpoint('run-1', 2)`` written out, for a script that names one checkpoint once:
    ``list(graph.get_state_history(thread))[::-1][2].config`` (awaited on ``run`` for an async
    saver)."""
    def written(m):
        expr = (f"list(graph.get_state_history({{'configurable': {{'thread_id': {m[1]}}}}}))"
                f"[::-1][{m[2]}].config")
        return _awaited(expr) if asynchronous else expr
    return _CHECKPOINT.sub(written, src)


def _saver_imports(kind: str) -> tuple:
    return {"memory": ("from langgraph.checkpoint.memory import InMemorySaver",),
            "postgres": ("import psycopg", "from psycopg.rows import dict_row",
                         "from langgraph.checkpoint.postgres import PostgresSaver"),
            "sqlite": ("from langgraph.checkpoint.sqlite import SqliteSaver",)}[kind]


def _imports(options, command: bool, asks: bool = True, saver: tuple = (),
             forges_asks: bool = False) -> tuple:
    out = []
    if options["api"] == "graph" and options.get("state", "typed") == "pydantic":
        out = ["from typing import Annotated, Literal",
               "from pydantic import BaseModel"]
    elif options["api"] == "graph":
        out = ["from typing import Annotated, TypedDict"]
    if options["api"] == "graph":
        out += ["from langgraph.graph import START, StateGraph"]
    else:
        out += ["from langgraph.func import entrypoint, task"]
    out += list(saver)
    types = [*(["Command"] if command else []), *(["Interrupt"] if forges_asks else []),
             *(["interrupt"] if asks else [])]
    if types:
        out.append(f"from langgraph.types import {', '.join(types)}")
    return tuple(out)


__all__ = ["reproduction", "thread_label"]
