"""Tamper with a thread's newest checkpoint *in the store*, never through LangGraph's API.

It speaks the standard library, LangGraph's serializer and psycopg only.

``corrupt``   bytes that do not decode: the checkpoint's serialized state (the SQLite checkpoint
              blob; the channel blobs PostgreSQL and the memory saver keep beside it) and its
              pending writes become ``0xc1`` bytes, a code msgpack reserves and never decodes.
              Variants ``trunchalf`` / ``trunczero`` truncate the SQLite file instead.
``invalid``   decodes, breaks the schema: an answer outside the workflow's values, or a done
              entry that is not a task number.
``forged``    well-formed and schema-valid content the run did not produce (the caller passes
              ``forge()``'s content), written into the state channels (graph API) or into the
              stored ``@task`` results (functional API).  Variant ``drophead`` deletes the
              newest checkpoint instead: a rollback to its parent.

Every edit re-encodes with the saver's own serializer and writes the bytes with SQL (or into
the memory saver's dicts).  PostgreSQL and the memory saver keep channel values in blobs keyed
by channel version, shared by every checkpoint at that version: an edit of the newest
checkpoint's blob is seen by older checkpoints at the same version too.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from contextlib import contextmanager

from . import driver as drv

GARBAGE = b"\xc1" * 16  # msgpack "never used" code: ormsgpack raises "invalid type Reserved"
INVALID = "<invalid>"
# LangGraph's own index of a special write (langgraph.checkpoint.base.WRITES_IDX_MAP).
WRITES_IDX = {"__error__": -1, "__scheduled__": -2, "__interrupt__": -3, "__resume__": -4}


# =================================================================================================
# What an edit writes.
# =================================================================================================


def invalid_content(done: list, answers: dict) -> tuple[list, dict]:
    """An answer outside the values if there is one, else a done entry that is no task."""
    if answers:
        task = sorted(answers, key=repr)[-1]
        return list(done), {**answers, task: INVALID}
    return list(done) + [INVALID], dict(answers)


TRUNCATIONS = ("trunchalf", "trunczero")


def truncated(driver, method: str) -> bool:
    """Whether a truncation (the variant's ``method``) destroyed the file already."""
    return method in TRUNCATIONS and bool(driver.table.get(drv.TRUNCATED))


def cuts_file(driver, how: str, method: str) -> bool:
    """Whether this tamper truncates the SQLite file: a ``corrupt`` of a ``trunc*`` variant, or
    any tamper once a truncation destroyed the file (``tamper`` below, both branches)."""
    return truncated(driver, method) or (how == "corrupt" and method in TRUNCATIONS)


def rewrites_whole(how: str, method: str) -> bool:
    """Whether the variant's tamper ``method`` does ``how`` another way than by editing the
    checkpoint's content: truncating the SQLite file (a ``corrupt``) or dropping the newest
    checkpoint (a ``forged``)."""
    return ((how == "corrupt" and method in TRUNCATIONS)
            or (how == "forged" and method == "drophead"))


def tamper(driver, h: str, how: str, method: str, forged=None, part=None) -> str:
    """Apply ``how`` to ``h``'s tip; ``method`` is the variant's tamper option.  Returns a
    line saying what was done (for the repro script and the logs).

    ``forged`` is ``forge()``'s ``(done, answers)``, or with a ``part`` (``Tamper.part``)
    ``(done, answers, pending)``: ``"pending"`` edits the interrupt writes alone (the pending-gate
    record: deleted, or one added for a gate that was not asked), ``"done"`` / ``"answer:<t>"``
    write the state and make the interrupt writes agree with the forged ``pending``."""
    store = driver.store
    if truncated(driver, method):
        # A truncation destroyed the file already (the model's reach "store": every thread is
        # damaged from then on): nothing is left to edit or forge, and the one damage left to
        # do is the variant's own, again.  Reading first would be the harness failing.
        keep_tips(driver)
        return truncate_sqlite(store, half=method == "trunchalf") + " (truncated before)"
    info = driver.table.get(drv._key(h))
    tip = driver.tip(h)
    if info is None or tip is None:
        raise drv.LostTrack(f"the adapter has no checkpoint of thread {h!r} to tamper with")
    lg = info["lg"]
    # The checkpoint tampered with, kept with the branch: a forgery may delete the interrupt
    # writes by which a fork finds its gate (``Driver.fork``, ``tampered_source``).
    driver.table.set(drv._key(h), {**info, "tampered": tip})
    # And the gates it asked, as every client that saw the question keeps them: another branch
    # whose history passes through this checkpoint (its fork's source, or one it shares with a
    # resume at the thread's head) forks from it by that id too.
    driver.remember_asked(h, tip)
    if store.kind == "custom":  # bring your own store: only its author's tamper
        return store.tamper(lg, tip, how, part)
    raw = RAW[store.kind](store)
    if rewrites_whole(how, method):
        if how == "corrupt":
            keep_tips(driver)
            driver.table.set(drv.TRUNCATED, True)
            return truncate_sqlite(store, half=method == "trunchalf")
        raw.drop(lg, tip)
        return f"forged: deleted checkpoint {tip} and its writes (rollback to its parent)"
    if how == "corrupt":
        raw.corrupt(lg, tip)
        driver.table.set(f"corrupt:{tip}", True)
        return f"corrupt: checkpoint {tip} and its writes now hold {GARBAGE[:2].hex()}... bytes"
    try:
        done, answers, current = driver.read(h)
    except Exception as exc:  # noqa: BLE001 - the saver's decoder, whatever it raises
        if not driver.table.get(f"corrupt:{tip}"):
            raise  # not bytes the harness corrupted: the adapter's own failure, shown as such
        # Another thread's corrupt tamper already reached these bytes: a branch that shares
        # the checkpoint with its source (the functional API's Command(resume) at the head
        # writes into it).  They decode to nothing a forgery or a schema break could start
        # from, and are damaged beyond either: left as they are (the model counts the thread
        # damaged already; what LangGraph does next is judged the same way), where failing the
        # tamper itself would be a tool error.
        return (f"{how}: checkpoint {tip} no longer decodes ({type(exc).__name__}: {exc}), a "
                "corrupt tamper of a branch sharing it reached it; left as it is")
    if how == "invalid":
        done, answers = invalid_content(done, answers)
    elif part is not None:
        done, answers, pending = forged
        if part != "pending":
            write_state(driver, raw, lg, tip, list(done), dict(answers))
        line = set_pending(raw, lg, tip, pending, current)
        return f"forged {part}: checkpoint {tip} now reads done={list(done)!r} " \
               f"answers={dict(answers)!r}; {line}"
    else:
        done, answers = forged
    write_state(driver, raw, lg, tip, list(done), dict(answers))
    return f"{how}: checkpoint {tip} now reads done={list(done)!r} answers={dict(answers)!r}"


def keep_tips(driver) -> None:
    """Before a truncation: every thread's tip, as the client that ran it keeps its id (the
    side table's ``tampered``), for a later fork to address (``Driver.tampered_source``); a
    thread whose rows cannot be read any more keeps what it had."""
    for key, info in driver.table.load().items():
        if key.startswith("thread:") and isinstance(info, dict):
            h = key.split(":", 1)[1]
            try:
                tip = driver.tip(h)
            except Exception:  # noqa: BLE001 - a file an earlier truncation left malformed
                continue
            if tip is not None:
                driver.table.set(key, {**info, "tampered": tip})
                driver.remember_asked(h, tip)


def set_pending(raw, lg: str, cid: str, pending, current) -> str:
    """Make checkpoint ``cid``'s interrupt writes (LangGraph's record of the pending gate) say
    ``pending`` (``current``: the gate they say now): the writes of the open interrupt deleted
    when ``None``, one ``interrupt({"gate": pending})`` added (under a task id LangGraph never
    made) when none is open.  Other writes, answered gates' interrupts included, are left as
    they are."""
    from langgraph.types import Interrupt

    if pending == current:
        return "kept the interrupt writes"
    writes = raw.writes(lg, cid)
    completed = drv._completed_tasks([(t, ch, v) for t, _, ch, v, _ in writes])
    open_ = [(t, i) for t, i, ch, v, _ in writes if ch == drv.INTERRUPT and t not in completed
             and current in [drv._gate_of(item) for item in
                             (v if isinstance(v, (list, tuple)) else (v,))]]
    if pending is None:
        for task_id, idx in open_:
            raw.delete_write(lg, cid, task_id, idx)
        return f"deleted {len(open_)} interrupt write(s) of gate {current}"
    task_id = str(uuid.uuid4())
    raw.put_write(lg, cid, task_id, WRITES_IDX[drv.INTERRUPT], drv.INTERRUPT,
                  (Interrupt(value={drv.wf.GATE_KEY: pending}, id=uuid.uuid4().hex),),
                  "~__pregel_pull, forged")
    return f"added an interrupt write for gate {pending} (task {task_id})"


def write_state(driver, raw, lg: str, cid: str, done: list, answers: dict) -> None:
    """Make ``read`` of checkpoint ``cid`` report ``(done, answers)``."""
    checkpoint = raw.checkpoint(lg, cid)
    writes = raw.writes(lg, cid)
    if driver.spec["api"] == "graph":
        raw.set_channels(lg, cid, checkpoint, {"done": done, "answers": answers})
        completed = drv._completed_tasks([(t, ch, v) for t, _, ch, v, _ in writes])
        for task_id, idx, channel, _, path in writes:  # results already in the state: emptied
            if task_id in completed and channel in ("done", "answers"):
                raw.put_write(lg, cid, task_id, idx, channel, [] if channel == "done" else {}, path)
        return
    if drv.END in checkpoint.get("channel_values", {}):
        raw.set_channels(lg, cid, checkpoint, {drv.END: {"done": done, "answers": answers}})
        return
    results = sorted(
        (w for w in writes if w[2] == drv.RETURN and isinstance(w[3], dict) and "task" in w[3]),
        key=lambda w: w[3]["task"],
    )
    for i, entry in enumerate(done):
        task = i + 1
        value = {"task": task, "done": entry, "answer": answers.get(task)}
        if i < len(results):
            task_id, idx, _, _, path = results[i]
            raw.put_write(lg, cid, task_id, idx, drv.RETURN, value, path)
        else:  # a task marked done that never ran: a result row of a task id LangGraph never made
            raw.put_write(lg, cid, str(uuid.uuid4()), 0, drv.RETURN, value,
                          "~__pregel_push, forged")
    for task_id, idx, _, _, _ in results[len(done):]:
        raw.delete_write(lg, cid, task_id, idx)


def truncate_sqlite(store, *, half: bool) -> str:
    """Fold the WAL into the file, then cut the file to half its size or to zero bytes."""
    if store.kind != "sqlite":
        raise drv.LostTrack("truncation applies to the SQLite store only")
    conn = store.inner.conn
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.DatabaseError:  # truncated before: a malformed file has no log to fold
        pass
    conn.close()
    size = os.path.getsize(store.path)
    keep = size // 2 if half else 0
    with open(store.path, "r+b") as f:
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    for suffix in ("-wal", "-shm"):
        try:
            os.unlink(f"{store.path}{suffix}")
        except FileNotFoundError:
            pass
    store.reopen()
    return f"corrupt: truncated {store.path.name} from {size} to {keep} bytes"


# =================================================================================================
# Direct access to each store's rows.
# =================================================================================================


class RawSqlite:
    def __init__(self, store):
        self.store, self.serde = store, store.inner.serde

    @contextmanager
    def _conn(self):
        """A connection of our own, in autocommit mode: each statement commits at once."""
        conn = sqlite3.connect(str(self.store.path), timeout=60, isolation_level=None)
        try:
            yield conn
        finally:
            conn.close()

    def checkpoint(self, lg, cid) -> dict:
        with self._conn() as conn:
            kind, blob = conn.execute(
                "SELECT type, checkpoint FROM checkpoints WHERE thread_id=? AND checkpoint_ns='' "
                "AND checkpoint_id=?", (lg, cid)).fetchone()
        return self.serde.loads_typed((kind, blob))

    def set_channels(self, lg, cid, checkpoint, values: dict) -> None:
        checkpoint = dict(checkpoint)
        checkpoint["channel_values"] = {**checkpoint.get("channel_values", {}), **values}
        kind, blob = self.serde.dumps_typed(checkpoint)
        with self._conn() as conn:
            conn.execute("UPDATE checkpoints SET type=?, checkpoint=? WHERE thread_id=? AND "
                         "checkpoint_ns='' AND checkpoint_id=?", (kind, blob, lg, cid))

    def writes(self, lg, cid) -> list:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT task_id, idx, channel, type, value, task_path FROM writes WHERE "
                "thread_id=? AND checkpoint_ns='' AND checkpoint_id=? ORDER BY task_id, idx",
                (lg, cid)).fetchall()
        return [(t, i, ch, self.serde.loads_typed((k, v)), p) for t, i, ch, k, v, p in rows]

    def put_write(self, lg, cid, task_id, idx, channel, value, path) -> None:
        kind, blob = self.serde.dumps_typed(value)
        with self._conn() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
                "task_path, idx, channel, type, value) VALUES (?, '', ?, ?, ?, ?, ?, ?, ?)",
                (lg, cid, task_id, path, idx, channel, kind, blob))

    def delete_write(self, lg, cid, task_id, idx) -> None:
        with self._conn() as conn:
            conn.execute("DELETE FROM writes WHERE thread_id=? AND checkpoint_ns='' AND "
                         "checkpoint_id=? AND task_id=? AND idx=?", (lg, cid, task_id, idx))

    def corrupt(self, lg, cid) -> None:
        with self._conn() as conn:
            conn.execute("UPDATE checkpoints SET checkpoint=? WHERE thread_id=? AND "
                         "checkpoint_ns='' AND checkpoint_id=?", (GARBAGE, lg, cid))
            conn.execute("UPDATE writes SET value=? WHERE thread_id=? AND checkpoint_ns='' AND "
                         "checkpoint_id=? AND type='msgpack'", (GARBAGE, lg, cid))

    def drop(self, lg, cid) -> None:
        with self._conn() as conn:
            for table in ("checkpoints", "writes"):
                conn.execute(f"DELETE FROM {table} WHERE thread_id=? AND checkpoint_ns='' AND "
                             "checkpoint_id=?", (lg, cid))


class RawPostgres:
    def __init__(self, store):
        self.store, self.serde = store, store.inner.serde

    def _cur(self):
        return self.store.inner.conn.cursor()

    def _row(self, lg, cid) -> dict:
        with self._cur() as cur:
            cur.execute("SELECT checkpoint FROM checkpoints WHERE thread_id=%s AND "
                        "checkpoint_ns='' AND checkpoint_id=%s", (lg, cid))
            return cur.fetchone()["checkpoint"]

    def checkpoint(self, lg, cid) -> dict:
        checkpoint = dict(self._row(lg, cid))
        values = dict(checkpoint.get("channel_values") or {})
        with self._cur() as cur:
            for channel, version in (checkpoint.get("channel_versions") or {}).items():
                cur.execute("SELECT type, blob FROM checkpoint_blobs WHERE thread_id=%s AND "
                            "checkpoint_ns='' AND channel=%s AND version=%s",
                            (lg, channel, str(version)))
                row = cur.fetchone()
                if row and row["type"] != "empty":
                    values[channel] = self.serde.loads_typed((row["type"], bytes(row["blob"])))
        checkpoint["channel_values"] = values
        return checkpoint

    def set_channels(self, lg, cid, checkpoint, values: dict) -> None:
        from psycopg.types.json import Jsonb

        stored = dict(self._row(lg, cid))
        versions = dict(stored.get("channel_versions") or {})
        with self._cur() as cur:
            for channel, value in values.items():
                kind, blob = self.serde.dumps_typed(value)
                if channel not in versions:  # never written: give it a version of its own
                    versions[channel] = f"tampered.{uuid.uuid4().hex}"
                cur.execute(
                    "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, "
                    "type, blob) VALUES (%s, '', %s, %s, %s, %s) ON CONFLICT (thread_id, "
                    "checkpoint_ns, channel, version) DO UPDATE SET type=EXCLUDED.type, "
                    "blob=EXCLUDED.blob", (lg, channel, str(versions[channel]), kind, blob))
                (stored.get("channel_values") or {}).pop(channel, None)
            stored["channel_versions"] = versions
            cur.execute("UPDATE checkpoints SET checkpoint=%s WHERE thread_id=%s AND "
                        "checkpoint_ns='' AND checkpoint_id=%s", (Jsonb(stored), lg, cid))

    def writes(self, lg, cid) -> list:
        with self._cur() as cur:
            cur.execute("SELECT task_id, idx, channel, type, blob, task_path FROM "
                        "checkpoint_writes WHERE thread_id=%s AND checkpoint_ns='' AND "
                        "checkpoint_id=%s ORDER BY task_id, idx", (lg, cid))
            rows = cur.fetchall()
        return [(r["task_id"], r["idx"], r["channel"],
                 self.serde.loads_typed((r["type"], bytes(r["blob"]))), r["task_path"])
                for r in rows]

    def put_write(self, lg, cid, task_id, idx, channel, value, path) -> None:
        kind, blob = self.serde.dumps_typed(value)
        with self._cur() as cur:
            cur.execute(
                "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
                "task_path, idx, channel, type, blob) VALUES (%s, '', %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE "
                "SET channel=EXCLUDED.channel, type=EXCLUDED.type, blob=EXCLUDED.blob",
                (lg, cid, task_id, path, idx, channel, kind, blob))

    def delete_write(self, lg, cid, task_id, idx) -> None:
        with self._cur() as cur:
            cur.execute("DELETE FROM checkpoint_writes WHERE thread_id=%s AND checkpoint_ns='' "
                        "AND checkpoint_id=%s AND task_id=%s AND idx=%s", (lg, cid, task_id, idx))

    def corrupt(self, lg, cid) -> None:
        versions = dict(self._row(lg, cid).get("channel_versions") or {})
        with self._cur() as cur:
            for channel, version in versions.items():
                cur.execute("UPDATE checkpoint_blobs SET blob=%s WHERE thread_id=%s AND "
                            "checkpoint_ns='' AND channel=%s AND version=%s AND type<>'empty'",
                            (GARBAGE, lg, channel, str(version)))
            cur.execute("UPDATE checkpoint_writes SET blob=%s WHERE thread_id=%s AND "
                        "checkpoint_ns='' AND checkpoint_id=%s AND type='msgpack'",
                        (GARBAGE, lg, cid))

    def drop(self, lg, cid) -> None:
        with self._cur() as cur:
            for table in ("checkpoints", "checkpoint_writes"):
                cur.execute(f"DELETE FROM {table} WHERE thread_id=%s AND checkpoint_ns='' AND "
                            "checkpoint_id=%s", (lg, cid))


class RawMemory:
    """The memory saver's dicts: storage[thread][ns][id] = (checkpoint, metadata, parent),
    blobs[(thread, ns, channel, version)], writes[(thread, ns, id)][(task, idx)]."""

    def __init__(self, store):
        self.saver, self.serde = store.inner, store.inner.serde

    def checkpoint(self, lg, cid) -> dict:
        typed, _, _ = self.saver.storage[lg][""][cid]
        checkpoint = dict(self.serde.loads_typed(typed))
        values = {}
        for channel, version in (checkpoint.get("channel_versions") or {}).items():
            blob = self.saver.blobs.get((lg, "", channel, version))
            if blob and blob[0] != "empty":
                values[channel] = self.serde.loads_typed(blob)
        checkpoint["channel_values"] = values
        return checkpoint

    def set_channels(self, lg, cid, checkpoint, values: dict) -> None:
        typed, meta, parent = self.saver.storage[lg][""][cid]
        stored = dict(self.serde.loads_typed(typed))
        versions = dict(stored.get("channel_versions") or {})
        for channel, value in values.items():
            if channel not in versions:
                versions[channel] = f"tampered.{uuid.uuid4().hex}"
            self.saver.blobs[(lg, "", channel, versions[channel])] = self.serde.dumps_typed(value)
        stored["channel_versions"] = versions
        self.saver.storage[lg][""][cid] = (self.serde.dumps_typed(stored), meta, parent)

    def writes(self, lg, cid) -> list:
        rows = self.saver.writes.get((lg, "", cid), {})
        return [(t, i, ch, self.serde.loads_typed(typed), path)
                for (t, i), (_, ch, typed, path) in sorted(rows.items())]

    def put_write(self, lg, cid, task_id, idx, channel, value, path) -> None:
        self.saver.writes[(lg, "", cid)][(task_id, idx)] = (
            task_id, channel, self.serde.dumps_typed(value), path)

    def delete_write(self, lg, cid, task_id, idx) -> None:
        self.saver.writes.get((lg, "", cid), {}).pop((task_id, idx), None)

    def corrupt(self, lg, cid) -> None:
        typed, meta, parent = self.saver.storage[lg][""][cid]
        versions = self.serde.loads_typed(typed).get("channel_versions") or {}
        self.saver.storage[lg][""][cid] = ((typed[0], GARBAGE), meta, parent)
        for channel, version in versions.items():
            key = (lg, "", channel, version)
            if key in self.saver.blobs and self.saver.blobs[key][0] != "empty":
                self.saver.blobs[key] = (self.saver.blobs[key][0], GARBAGE)
        rows = self.saver.writes.get((lg, "", cid), {})
        for key, (t, ch, typed_value, path) in list(rows.items()):
            rows[key] = (t, ch, (typed_value[0], GARBAGE), path)

    def drop(self, lg, cid) -> None:
        self.saver.storage[lg][""].pop(cid, None)
        self.saver.writes.pop((lg, "", cid), None)


RAW = {"sqlite": RawSqlite, "postgres": RawPostgres, "memory": RawMemory}
