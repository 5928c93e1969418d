"""The LangGraph adapter's direct store access: tamper really changes what is stored,
clone_store copies byte for byte, PostgreSQL databases are created and dropped per case."""

from __future__ import annotations

import filecmp

import pytest
from langgraph_testkit import run_op

from adapters.langgraph import store as lgstore
from adapters.protocol import Durable, Resume, Start, Unreadable, Workflow, forge, forge_parts


def snapshot(case) -> object:
    """Every stored byte of the case's store, in a comparable form."""
    store = case.store
    if store.kind == "sqlite":
        return {p.name: p.read_bytes() for p in store.files()}
    if store.kind == "postgres":
        with store.inner.conn.cursor() as cur:
            out = {}
            for table, key in (("checkpoints", "checkpoint_id"),
                               ("checkpoint_blobs", "channel, version"),
                               ("checkpoint_writes", "checkpoint_id, task_id, idx")):
                cur.execute(f"SELECT * FROM {table} ORDER BY thread_id, {key}")
                out[table] = [dict(r) for r in cur.fetchall()]
            return out
    saver = store.inner
    return (repr(dict(saver.storage)), repr(dict(saver.blobs)), repr(dict(saver.writes)))


TAMPER_VARIANTS = ["sqlite-graph-sync-head-update", "postgres-graph-sync-head-update",
                   "memory-graph-sync-head-update", "sqlite-func-sync-head-update",
                   "postgres-func-sync-head-update"]


@pytest.mark.parametrize("name", TAMPER_VARIANTS)
@pytest.mark.parametrize("how", ["corrupt", "invalid", "forged"])
@pytest.mark.parametrize("answered", [False, True])
def test_tamper_changes_the_stored_content(name, how, answered, variant, workflow, open_case,
                                           ledger):
    case = open_case(variant(name), workflow)
    run_op(case, Start("t0"), 0, ledger)
    if answered:
        run_op(case, Resume("t0", value="a"), 1, ledger)
    view = case.query("t0")
    before = snapshot(case)
    case.tamper("t0", how)
    assert snapshot(case) != before
    if how == "corrupt":
        with pytest.raises(Unreadable):
            case.query("t0")
    elif how == "invalid":
        assert not case.query("t0").is_valid(workflow)
    else:
        expected = forge(workflow, Durable(view.done, view.answers, view.pending))
        got = case.query("t0")
        assert (got.done, got.answers) == (expected.done, expected.answers)


@pytest.mark.parametrize("name,shrinks_to", [("sqlite-graph-sync-head-update-trunchalf", "half"),
                                             ("sqlite-graph-sync-head-update-trunczero", "zero")])
def test_truncation_cuts_the_sqlite_file(name, shrinks_to, variant, workflow, open_case, ledger):
    case = open_case(variant(name), workflow)
    run_op(case, Start("t0"), 0, ledger)
    case.store.inner.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = case.store.path.stat().st_size
    case.tamper("t0", "corrupt")
    assert case.store.path.stat().st_size == (size // 2 if shrinks_to == "half" else 0)


@pytest.mark.parametrize("name", ["sqlite-graph-sync-head-update-drophead",
                                  "postgres-graph-sync-head-update-drophead"])
def test_drophead_deletes_the_newest_checkpoint(name, variant, workflow, open_case, ledger):
    case = open_case(variant(name), workflow)
    run_op(case, Start("t0"), 0, ledger)
    tip = case.driver.tip("t0")
    case.tamper("t0", "forged")
    assert tip not in {row.checkpoint_id for row in case.store.rows("t0")}
    assert case.driver.tip("t0") < tip


def test_sqlite_clone_is_byte_identical(variant, workflow, open_case, ledger, tmp_path):
    case = open_case(variant("sqlite-graph-sync-head-update"), workflow)
    run_op(case, Start("t0"), 0, ledger)
    dest = tmp_path / "twin"
    dest.mkdir()
    case.clone_store(dest)
    for path in case.store.files():
        assert filecmp.cmp(path, dest / path.name, shallow=False)
    assert (dest / "sidetable.json").read_bytes() == case.table.path.read_bytes()


def test_postgres_clone_copies_every_row_and_is_dropped(adapter, variant, workflow, open_case,
                                                         ledger, tmp_path):
    v = variant("postgres-graph-sync-head-update")
    case = open_case(v, workflow)
    run_op(case, Start("t0"), 0, ledger)
    dest = tmp_path / "twin"
    dest.mkdir()
    case.clone_store(dest)
    twin = adapter.open(v, workflow, dest)
    try:
        assert snapshot(twin) == snapshot(case)
        assert twin.query("t0") == case.query("t0")
        assert twin.store.owner and twin.store.dbname != case.store.dbname
    finally:
        twin.close()
    assert not lgstore.database_exists(twin.store.dbname)
    assert lgstore.database_exists(case.store.dbname)  # the original is untouched


def test_postgres_database_lifecycle(adapter, variant, workflow, tmp_path):
    v = variant("postgres-graph-sync-head-update")
    workdir = tmp_path / "case"
    workdir.mkdir()
    first = adapter.open(v, workflow, workdir)
    name = first.store.dbname
    assert first.store.owner and lgstore.database_exists(name)
    second = adapter.open(v, workflow, workdir)  # a replacement worker: not the owner
    assert not second.store.owner
    second.close()
    assert lgstore.database_exists(name)
    first.store.release()  # the owner was killed: close() never ran
    adapter.cleanup(v, workdir)
    assert not lgstore.database_exists(name)
    adapter.cleanup(v, workdir)  # idempotent
    with pytest.raises(RuntimeError, match="gone"):
        adapter.open(v, workflow, workdir)  # a lost store is loud, never silently recreated


def test_a_database_still_being_created_when_its_worker_died_is_not_left_behind(tmp_path):
    """A worker SIGKILLed while its ``CREATE DATABASE`` runs (a crash point, or a campaign's
    deadline) leaves the server finishing the command; the cleanup that follows must not drop
    before the database exists and leave it behind for good (one database leaked in 2 of 4
    fifteen-second PostgreSQL campaigns before ``drop_database`` ended such a creation first).
    The creation is made slow enough to be caught in flight by copying a template of ~100 MB;
    the drop runs once the server shows it running."""
    import threading
    import uuid

    import psycopg

    template, name = f"rf_lg_tpl_{uuid.uuid4().hex[:12]}", f"rf_lg_{uuid.uuid4().hex[:20]}"
    lgstore.admin_execute(f'CREATE DATABASE "{template}"')
    creator = psycopg.connect(lgstore.admin_dsn(), autocommit=True)
    try:
        with psycopg.connect(lgstore.dsn_for(template), autocommit=True) as conn:
            conn.execute("CREATE TABLE filler AS "
                         "SELECT repeat(md5(g::text), 64) AS pad FROM generate_series(1, 40000) g")
        ended = []

        def create():  # the dying worker's command, as the server runs it
            try:
                creator.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
            except psycopg.Error as exc:
                ended.append(exc)

        thread = threading.Thread(target=create)
        thread.start()
        while not lgstore.creating(name):  # the server's own view
            assert thread.is_alive(), "the creation ended before it was seen running"
        lgstore.drop_database(name)  # what the cleanup runs for the dead worker's workdir
        thread.join()
        assert not lgstore.database_exists(name)
        assert ended and "terminat" in str(ended[0]), ended  # ended, not finished after the drop
    finally:
        creator.close()
        lgstore.admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        lgstore.admin_execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')


def test_memory_store_cannot_be_cloned(variant, workflow, open_case, ledger, tmp_path):
    case = open_case(variant("memory-graph-sync-head-update"), workflow)
    with pytest.raises(NotImplementedError):
        case.clone_store(tmp_path)


TWO_GATES = Workflow(3, {1, 3}, ("a", "b"))


@pytest.mark.parametrize("name", TAMPER_VARIANTS)
@pytest.mark.parametrize("part", ["done", "answer:1", "pending"])
def test_tamper_forged_by_part_writes_that_part(name, part, variant, open_case, ledger):
    """Each part as ``forge(part)`` says; ``pending`` alone deletes the open interrupt write
    (LangGraph's record of the pending gate) and leaves the state channels as they were."""
    case = open_case(variant(name), TWO_GATES)
    run_op(case, Start("t0"), 0, ledger)
    run_op(case, Resume("t0", value="a"), 1, ledger)  # done (1, 2), gate 3 pending
    view = case.query("t0")
    durable = Durable(view.done, view.answers, view.pending)
    assert part in forge_parts(TWO_GATES, durable)
    case.tamper("t0", "forged", part)
    got = case.query("t0")
    expected = forge(TWO_GATES, durable, part)
    assert (got.done, got.answers, got.pending) == (expected.done, expected.answers,
                                                    expected.pending)


@pytest.mark.parametrize("name", ["sqlite-graph-sync-head-update", "sqlite-func-sync-head-update"])
def test_tamper_forged_pending_records_a_gate_that_was_not_asked(name, variant, open_case,
                                                                 ledger):
    from adapters.protocol import CrashAt

    case = open_case(variant(name), TWO_GATES)
    run_op(case, Start("t0"), 0, ledger)
    # Task 2 committed, gate 3 not asked yet (the run died as task 3 began).
    run_op(case, Resume("t0", value="a", crash=CrashAt(3, "before_effect")), 1, ledger)
    assert case.query("t0").pending is None
    case.tamper("t0", "forged", "pending")
    assert case.query("t0").pending == 3


@pytest.mark.parametrize("name", ["sqlite-graph-sync-head-update", "sqlite-func-sync-head-copy"])
@pytest.mark.parametrize("part", ["pending", "done"])
def test_a_fork_of_a_tip_whose_pending_record_was_forged_forks_from_that_tip(name, part, variant,
                                                                             open_case, ledger):
    """A forgery of the gate checkpoint's pending record (or of its done list, made to agree)
    deletes the interrupt writes a fork's lookup finds its gate by.  The fork still addresses
    that checkpoint (the client kept its id): it forks from the tampered tip, and LangGraph
    refuses it or runs on it, a verdict, where the adapter used to lose track of it (a tool
    error: 11 of 6,140 examples, six SQLite variants, 2026-12-05)."""
    from adapters.protocol import Fork

    wf = Workflow(2, frozenset({1}), ("a", "b"))
    case = open_case(variant(name), wf)
    run_op(case, Start("t0"), 0, ledger)
    tip = case.driver.tip("t0")
    case.tamper("t0", "forged", part)
    assert case.driver.gate_checkpoint("t0", 1) is None  # the lookup alone finds nothing
    assert case.driver.tampered_source("t0") == tip
    from adapters.langgraph.driver import LostTrack
    from adapters.protocol import HarnessError
    from fuzz.internal.hooks import EngineHooks

    fork = Fork("t0", gate=1, value="b", new_thread="f1")
    hooks = EngineHooks(fork, seq=1, branch="f1", ledger=ledger)
    try:
        outcome = case.run(fork, hooks)
    except (HarnessError, LostTrack):
        raise  # the tool error this test is about
    except Exception:  # noqa: BLE001 - LangGraph's refusal of the forged checkpoint: a verdict
        outcome = "rejected"
    assert outcome in ("completed", "rejected"), outcome


@pytest.mark.parametrize("name", ["sqlite-graph-sync-head-update-trunchalf",
                                  "sqlite-graph-sync-head-update-trunczero"])
@pytest.mark.parametrize("how, part", [("corrupt", None), ("forged", None), ("invalid", None),
                                       ("forged", "pending")])
def test_a_tamper_after_a_truncation_truncates_again(name, how, part, variant, open_case,
                                                     ledger):
    """Once a truncation destroyed the file, no checkpoint of any thread is left to read, edit
    or forge: a later tamper (of another thread, of any kind) does the variant's own damage
    again, where it used to fail reading the file (a tool error that discarded every such
    example: 7 of about 700 on each of the two variants, 2026-12-05)."""
    wf = Workflow(2, frozenset({1}), ("a", "b"))
    case = open_case(variant(name), wf)
    run_op(case, Start("t0"), 0, ledger)
    run_op(case, Start("t1"), 1, ledger)
    case.tamper("t0", "corrupt")
    case.tamper("t1", how, part)  # raised DatabaseError or HarnessError before
    assert "truncated before" in case.log[-1]


@pytest.mark.parametrize("name, how", [("sqlite-graph-sync-head-update-trunczero", "corrupt"),
                                       ("sqlite-graph-sync-head-update-drophead", "forged")])
def test_a_fork_addresses_the_checkpoint_its_client_kept_when_the_store_lost_it(name, how, variant,
                                                                             open_case, ledger):
    """A truncation to zero bytes, or the drop of the newest checkpoint, takes the gate's
    checkpoint out of the store; a client that kept its id forks from it, and LangGraph answers
    (a verdict), where the adapter's lookup used to find nothing (a tool error)."""
    from adapters.langgraph.driver import LostTrack
    from adapters.protocol import Fork, HarnessError
    from fuzz.internal.hooks import EngineHooks

    wf = Workflow(2, frozenset({1}), ("a", "b"))
    case = open_case(variant(name), wf)
    run_op(case, Start("t0"), 0, ledger)
    tip = case.driver.tip("t0")
    case.tamper("t0", how)
    assert case.driver.gate_checkpoint("t0", 1) is None  # the lookup alone finds nothing
    assert case.driver.tampered_source("t0") == tip
    fork = Fork("t0", gate=1, value="b", new_thread="f1")
    try:
        outcome = case.run(fork, EngineHooks(fork, seq=1, branch="f1", ledger=ledger))
    except (HarnessError, LostTrack):
        raise  # the tool error this test is about
    except Exception:  # noqa: BLE001 - LangGraph's own refusal is a verdict too
        outcome = "rejected"
    assert outcome in ("completed", "interrupted", "rejected"), outcome


@pytest.mark.parametrize("name", ["sqlite-graph-sync-head-update-trunczero",
                                  "sqlite-graph-sync-head-update-drophead"])
def test_recover_of_a_thread_whose_checkpoint_the_store_lost_resumes_it(name, variant, open_case,
                                                                       ledger):
    """A file cut to zero bytes, or the drop of a one-checkpoint thread's only checkpoint: the
    client saw a checkpoint, so its recovery resumes what it believes is stored, and LangGraph
    refuses (``EmptyInputError``).  Starting the run again with its input, as for a run that died
    before its first checkpoint, was the adapter's choice: it fired e1 again and made a ✗ of it."""
    from adapters.protocol import Recover
    from fuzz.internal.hooks import EngineHooks

    wf = Workflow(1, frozenset(), ("a", "b"))
    case = open_case(variant(name), wf)
    run_op(case, Start("t0"), 0, ledger)
    how = "corrupt" if name.endswith("trunczero") else "forged"
    while case.driver.tip("t0") is not None:  # drophead rolls back one checkpoint a tamper
        case.tamper("t0", how)
    op = Recover("t0")
    with pytest.raises(Exception, match="EmptyInputError|no input|Received no input"):
        case.run(op, EngineHooks(op, seq=1, branch="t0", ledger=ledger))
    assert case.driver.calls[-1].startswith("invoke(None,")


def test_recover_of_a_run_that_never_checkpointed_starts_it_again(variant, open_case, ledger):
    from adapters.protocol import Recover
    from fuzz.internal.hooks import EngineHooks

    wf = Workflow(1, frozenset(), ("a", "b"))
    case = open_case(variant("sqlite-graph-sync-head-update"), wf)
    op = Recover("t0")
    assert case.run(op, EngineHooks(op, seq=0, branch="t0", ledger=ledger)) == "completed"
    assert case.driver.calls[-1].startswith("invoke(input,")


def test_a_clone_leaves_the_case_connection_its_locks(variant, open_case, ledger, tmp_path):
    """``clone_store`` (a twin recovery's copy) runs beside the case's open SqliteSaver
    connection.  Copied in this process, the copy's closes dropped that connection's locks: the
    next process to close a connection deleted the WAL under it, and a thread started after it
    was seen by no other process (t1 read back as never started after a SIGKILL, 9 of 10
    replays).  The copy is made by ``cp`` in a child now."""
    import subprocess
    import sys

    case = open_case(variant("sqlite-graph-sync-head-update"), Workflow(1, frozenset({1}),
                                                                        ("a", "b")))
    run_op(case, Start("t0"), 0, ledger)
    (tmp_path / "twin").mkdir()
    case.clone_store(tmp_path / "twin")
    threads = (f"import sqlite3; c = sqlite3.connect({str(case.store.path)!r}); "
               "print(sorted({t for (t,) in c.execute('SELECT thread_id FROM checkpoints')})); "
               "c.close()")
    subprocess.run([sys.executable, "-c", threads], check=True, capture_output=True)
    run_op(case, Start("t1"), 1, ledger)
    seen = subprocess.run([sys.executable, "-c", threads], check=True, capture_output=True,
                          text=True).stdout.strip()
    assert seen == "['t0', 't1']"
