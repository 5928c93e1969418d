"""Reading, tampering with and copying CrewAI's stores directly, without running a flow.

A case's store is the directory ``workdir/store`` (paths are relative to ``workdir``, the worker's
current directory, because CrewAI serialises them into checkpoints):

- ``store/flows.db``: ``SQLiteFlowPersistence``: ``flow_states`` (one row per completed method of a
  ``@persist`` flow, and one per pause) and ``pending_feedback`` (one row per paused flow id);
  every variant keeps its pending rows here;
- ``store/ck/<thread>/<branch>/<ts>_<uuid8>_p-<parent>.json``: ``JsonProvider`` checkpoints;
- ``store/ck/<thread>.db``: ``SqliteProvider`` checkpoints (``checkpoints`` table, ``data JSONB``);
- ``store/sidetable.json``: harness thread -> flow id, checkpoint location, fork origin.

"Latest checkpoint" follows ``crewai checkpoint resume <location>`` without an id
(``crewai_cli/checkpoint_cli.py:_info_json_latest`` / ``_info_sqlite_latest``): newest file by
mtime under the location (ties broken by path), or the highest rowid.  JSONB needs SQLite >= 3.45,
so SQLite checkpoints are read through ``pysqlite3`` (see ``newer_sqlite``).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from adapters.protocol import Durable, StateView, Unreadable, Workflow, forge
from adapters.files import copy_files

from .workflow import gate_of_method

STORE = Path("store")
FLOWS_DB = STORE / "flows.db"
CHECKPOINTS = STORE / "ck"


#: SQLite releases whose unix VFS has a lock-order inversion: the last close of a WAL database
#: (``sqlite3WalClose`` -> ``unixLock`` -> ``unixIsSharingShmNode``) holds the file's inode mutex
#: and waits for the VFS-wide one, while an open of the same file (``unixOpen`` ->
#: ``findReusableFd``) holds them the other way round.  Fixed in 3.51.2.  CrewAI's checkpoint
#: writers open and close one file on several pool threads at once, and two of them deadlocked
#: on it (py-spy: docs/frameworks/crewai.md); with the VFS-wide mutex held for good, every later
#: open of any SQLite file in that process waits too.  That would be our choice of SQLite hanging,
#: not CrewAI's behaviour, so the adapter refuses these releases.
DEADLOCKING_SQLITE = ((3, 51, 0), (3, 51, 1))


def newer_sqlite():
    """The DB-API module of a SQLite >= 3.45 (``jsonb``), from ``pysqlite3`` (its wheel bundles
    its own SQLite); never one of ``DEADLOCKING_SQLITE``."""
    try:
        import pysqlite3.dbapi2 as module
    except ImportError as exc:  # pragma: no cover - the constraints file installs it
        raise ImportError(
            "the SqliteProvider variants need SQLite >= 3.45 for jsonb(): "
            "pip install -c constraints/crewai.txt pysqlite3"
        ) from exc
    if tuple(module.sqlite_version_info[:3]) in DEADLOCKING_SQLITE:
        raise ImportError(
            f"pysqlite3 bundles SQLite {module.sqlite_version}, whose unix VFS can deadlock two "
            "threads writing one WAL file (fixed in SQLite 3.51.2): "
            "pip install -c constraints/crewai.txt pysqlite3"
        )
    return module


# -- the FlowPersistence file --------------------------------------------------------------------


def read_persisted(workdir: Path, fid: str) -> tuple[dict | None, str | None]:
    """(latest ``flow_states`` state of ``fid`` or None, paused method name or None)."""
    db = Path(workdir) / FLOWS_DB
    if not db.exists():
        return None, None
    conn = sqlite3.connect(db)
    try:
        row = conn.execute(
            "SELECT state_json FROM flow_states WHERE flow_uuid = ? ORDER BY id DESC LIMIT 1",
            (fid,),
        ).fetchone()
        pending = conn.execute(
            "SELECT context_json FROM pending_feedback WHERE flow_uuid = ?", (fid,)
        ).fetchone()
    except sqlite3.DatabaseError as exc:
        raise Unreadable(f"flows.db: {exc}") from exc
    finally:
        conn.close()
    state = _decode(row[0], "flow_states.state_json") if row else None
    method = _decode(pending[0], "pending_feedback.context_json").get("method_name") if pending else None
    return state, method


def tamper_persisted(workdir: Path, fid: str, edit) -> bool:
    """Apply ``edit(text) -> text`` to the latest ``flow_states`` row of ``fid`` and to its pending
    row's state (``from_pending`` reads that copy); returns whether anything was stored."""
    conn = sqlite3.connect(Path(workdir) / FLOWS_DB)
    try:
        with conn:
            row = conn.execute(
                "SELECT id, state_json FROM flow_states WHERE flow_uuid = ? ORDER BY id DESC LIMIT 1",
                (fid,),
            ).fetchone()
            if row:
                conn.execute("UPDATE flow_states SET state_json = ? WHERE id = ?", (edit(row[1]), row[0]))
            pending = conn.execute(
                "SELECT id, state_json FROM pending_feedback WHERE flow_uuid = ?", (fid,)
            ).fetchone()
            if pending:
                conn.execute(
                    "UPDATE pending_feedback SET state_json = ? WHERE id = ?", (edit(pending[1]), pending[0])
                )
        return bool(row or pending)
    finally:
        conn.close()


# -- checkpoints -----------------------------------------------------------------------------------


def json_location(thread: str) -> str:
    return str(CHECKPOINTS / thread)


def sqlite_location(thread: str) -> str:
    return str(CHECKPOINTS / f"{thread}.db")


def list_checkpoints(workdir: Path, location: str) -> list[str]:
    """Restore locations of every checkpoint under ``location``, oldest first (CLI order)."""
    path = Path(workdir) / location
    if location.endswith(".db"):
        if not path.exists():
            return []
        conn = newer_sqlite().connect(str(path))
        try:
            rows = conn.execute("SELECT id FROM checkpoints ORDER BY rowid").fetchall()
        except Exception as exc:  # no table yet, or a corrupt file
            if "no such table" in str(exc):
                return []
            raise Unreadable(f"{location}: {exc}") from exc
        finally:
            conn.close()
        return [f"{location}#{row[0]}" for row in rows]
    files = [p for p in path.rglob("*.json") if p.is_file()]
    files.sort(key=lambda p: (p.stat().st_mtime_ns, str(p)))
    return [str(p.relative_to(workdir)) for p in files]


def latest_checkpoint(workdir: Path, location: str) -> str | None:
    found = list_checkpoints(workdir, location)
    return found[-1] if found else None


def read_checkpoint(workdir: Path, loc: str) -> dict:
    """The decoded checkpoint document at ``loc`` (``file.json`` or ``db#id``)."""
    if "#" in loc:
        db, checkpoint_id = loc.rsplit("#", 1)
        conn = newer_sqlite().connect(str(Path(workdir) / db))
        try:
            row = conn.execute("SELECT json(data) FROM checkpoints WHERE id = ?", (checkpoint_id,)).fetchone()
        except Exception as exc:
            raise Unreadable(f"{loc}: {exc}") from exc
        finally:
            conn.close()
        if row is None:
            raise Unreadable(f"{loc}: no such checkpoint")
        return _decode(row[0], loc)
    try:
        text = (Path(workdir) / loc).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable(f"{loc}: {exc}") from exc
    return _decode(text, loc)


def flow_entity(doc: dict) -> dict:
    for entity in doc.get("entities") or []:
        if isinstance(entity, dict) and entity.get("entity_type") == "flow":
            return entity
    raise Unreadable("checkpoint holds no flow entity")


def paused_gate(doc: dict) -> int | None:
    """The gate a checkpoint written on ``method_execution_paused`` was taken at."""
    if doc.get("trigger") != "method_execution_paused":
        return None
    nodes = (doc.get("event_record") or {}).get("nodes") or {}
    paused = [
        node["event"] for node in nodes.values()
        if node.get("event", {}).get("type") == "method_execution_paused"
    ]
    if not paused:
        return None
    latest = max(paused, key=lambda e: (e.get("timestamp") or "", e.get("emission_sequence") or 0))
    return gate_of_method(latest.get("method_name") or "")


def write_checkpoint(workdir: Path, loc: str, text_or_bytes) -> None:
    """Overwrite the stored content at ``loc`` in place (a JSON file keeps its mtime, so the
    CLI's ordering of checkpoints is unchanged; a SQLite row keeps its rowid)."""
    if "#" in loc:
        db, checkpoint_id = loc.rsplit("#", 1)
        conn = newer_sqlite().connect(str(Path(workdir) / db))
        try:
            with conn:
                if isinstance(text_or_bytes, bytes):  # corrupt: raw bytes that are not JSONB
                    conn.execute("UPDATE checkpoints SET data = ? WHERE id = ?", (text_or_bytes, checkpoint_id))
                else:
                    conn.execute(
                        "UPDATE checkpoints SET data = jsonb(?) WHERE id = ?", (text_or_bytes, checkpoint_id)
                    )
        finally:
            conn.close()
        return
    path = Path(workdir) / loc
    stat = path.stat()
    data = text_or_bytes if isinstance(text_or_bytes, bytes) else text_or_bytes.encode()
    path.write_bytes(data)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def raw_checkpoint_bytes(workdir: Path, loc: str) -> bytes:
    """The stored bytes at ``loc`` (tests compare them before and after ``tamper``)."""
    if "#" in loc:
        db, checkpoint_id = loc.rsplit("#", 1)
        conn = sqlite3.connect(Path(workdir) / db)
        try:
            row = conn.execute("SELECT data FROM checkpoints WHERE id = ?", (checkpoint_id,)).fetchone()
        finally:
            conn.close()
        value = row[0] if row else b""
        return value if isinstance(value, bytes) else str(value).encode()
    return (Path(workdir) / loc).read_bytes()


# -- state documents -----------------------------------------------------------------------------


def view_of(workflow: Workflow, state: dict | None, pending_method: str | None) -> StateView:
    """The contract's view of a stored CrewAI state dict (whatever it holds)."""
    pending = gate_of_method(pending_method) if pending_method else None
    if state is None:
        return StateView.of(workflow, (), {}, pending)
    if not isinstance(state, dict):
        raise Unreadable(f"state is not an object: {state!r}"[:200])
    done = state.get("done", [])
    answers = state.get("answers", {})
    if not isinstance(done, list) or not isinstance(answers, dict):
        raise Unreadable(f"state fields have the wrong shape: {state!r}"[:200])
    return StateView.of(workflow, done, {_task(k): v for k, v in answers.items()}, pending)


def edit_for(how: str, workflow: Workflow, view: StateView, part: str | None = None):
    """``edit(text) -> text`` that turns a stored state JSON into its tampered form (``None``
    for a forgery of the pending-gate record alone, which lives outside the state)."""
    if how == "corrupt":
        return lambda text: text[: max(1, len(text) // 2)]  # truncated: does not decode
    if part == "pending":
        return None

    def rewrite(text: str) -> str:
        state = json.loads(text)
        state["done"], state["answers"] = _tampered(how, workflow, view, part)
        return json.dumps(state)

    return rewrite


def _tampered(how: str, workflow: Workflow, view: StateView, part=None) -> tuple[list, dict]:
    done, answers = list(view.done), {str(t): v for t, v in view.answers}
    if how == "invalid":
        if answers:
            answers[sorted(answers)[-1]] = "<not-a-value>"  # an answer outside workflow.values
        else:
            done.append(workflow.n + 1)  # an unknown task
        return done, answers
    forged = forged_durable(workflow, view, part)
    return list(forged.done), {str(t): v for t, v in forged.answers}


def forged_durable(workflow: Workflow, view: StateView, part=None) -> Durable:
    return forge(workflow, Durable(tuple(view.done), view.answers, view.pending), part)


def set_pending(workdir: Path, fid: str, flow_class: str, gate: int | None) -> str:
    """Make CrewAI's pending-gate record of ``fid`` (its ``pending_feedback`` row, which
    ``from_pending`` and ``load_pending_feedback`` read) say ``gate``: deleted for ``None``, else
    a row for ``gate_<gate>`` as ``save_pending_feedback`` writes it (CrewAI's own
    ``PendingFeedbackContext.to_dict``), holding the latest saved state unchanged."""
    from crewai.flow.async_feedback.types import PendingFeedbackContext

    conn = sqlite3.connect(Path(workdir) / FLOWS_DB)
    try:
        with conn:
            old = conn.execute("SELECT context_json FROM pending_feedback WHERE flow_uuid = ?",
                               (fid,)).fetchone()
            if gate is None:
                conn.execute("DELETE FROM pending_feedback WHERE flow_uuid = ?", (fid,))
                return f"deleted the pending_feedback row ({'one' if old else 'none'} stored)"
            if old is not None and gate_of_method(json.loads(old[0]).get("method_name") or "") == gate:
                return "kept the pending_feedback row"
            row = conn.execute("SELECT state_json FROM flow_states WHERE flow_uuid = ? "
                               "ORDER BY id DESC LIMIT 1", (fid,)).fetchone()
            context = PendingFeedbackContext(flow_id=fid, flow_class=flow_class,
                                             method_name=f"gate_{gate}", method_output=None,
                                             message=f"gate {gate}")
            conn.execute(
                "INSERT OR REPLACE INTO pending_feedback (flow_uuid, context_json, state_json, "
                "created_at) VALUES (?, ?, ?, ?)",
                (fid, json.dumps(context.to_dict()), row[0] if row else "{}",
                 context.requested_at.isoformat()))
        return f"added a pending_feedback row for gate_{gate}"
    finally:
        conn.close()


def completed_methods(workflow: Workflow, done) -> list[str]:
    """The method names a flow that completed ``done`` has completed (for a forged checkpoint)."""
    methods = []
    for t in done:
        if isinstance(t, int) and t in workflow.gates:
            methods.append(f"gate_{t}")
        methods.append(f"task_{t}")
    return methods


def clone(workdir: Path, dest: Path) -> None:
    """Copy ``workdir/store`` into ``dest/store`` byte for byte with fresh file metadata, as a
    restored backup or a second host has it, SQLite ``-wal`` / ``-shm`` files as they are.
    The JSON provider orders checkpoints by mtime (``json_provider.py`` ``prune``; the CLI's
    "latest"): a copy's mtimes are those of the copy, so which checkpoint is latest in a twin
    is what a restore makes of it, not the original's."""
    copy_files(Path(workdir) / STORE, Path(dest) / STORE)


def _decode(text, where: str):
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise Unreadable(f"{where}: {exc}") from exc


def _task(key):
    return int(key) if isinstance(key, str) and key.lstrip("-").isdigit() else key
