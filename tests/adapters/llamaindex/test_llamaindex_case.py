"""The adapter's machinery in this process (core and server variants): crash points fire inside
the intended task and phase, query reads what a run stored (also from a reopened case), tamper
changes the stored content, clone_store copies bytes, a fork's branch is queryable, a bad output
is either stored or refused.  No verdict about the framework is asserted."""

from __future__ import annotations

import sqlite3

import pytest

from adapters.protocol import CrashAt, Fork, Recover, Resume, Start, StateView, Unreadable

from llamaindex_testkit import CORE, IN_PROCESS, SERVER, WORKFLOW


@pytest.mark.parametrize("name", IN_PROCESS)
@pytest.mark.parametrize("phase, expected", [
    ("before_effect", []),
    ("in_flight", [("t0", 1, None)]),
    ("after_commit", [("t0", 1, None)]),
])
def test_exception_crash_fires_in_the_intended_task_and_phase(make_driver, name, phase, expected):
    d = make_driver(name)
    outcome, rows, error = d.run(Start("t0", crash=CrashAt(1, phase)))
    assert outcome == "crashed", error
    assert rows == expected
    assert f"task 1, {phase}" in str(error) or f"task 1, {phase}" in str(error.__cause__)


@pytest.mark.parametrize("name", IN_PROCESS)
def test_crash_in_a_later_task_leaves_earlier_effects_in_the_ledger(make_driver, name):
    d = make_driver(name)
    assert d.run(Start("t0"))[0] == "interrupted"
    outcome, rows, _ = d.run(Resume("t0", value="a", crash=CrashAt(2, "in_flight")))
    assert (outcome, rows) == ("crashed", [("t0", 2, "a")])
    outcome, rows, _ = d.run(Recover("t0"))
    assert outcome in ("interrupted", "completed", "rejected", "crashed")


@pytest.mark.parametrize("name", IN_PROCESS)
def test_query_reads_what_the_run_stored_also_after_reopening(make_driver, name):
    d = make_driver(name)
    assert d.case.query("t0") == StateView.of(WORKFLOW, (), {}, None)
    assert d.run(Start("t0"))[:2] == ("interrupted", [("t0", 1, None)])
    assert d.case.query("t0") == StateView.of(WORKFLOW, (1,), {}, 2)
    assert d.run(Resume("t0", value="a"))[:2] == ("interrupted", [("t0", 2, "a")])
    expected = StateView.of(WORKFLOW, (1, 2), {2: "a"}, 3)
    assert d.case.query("t0") == expected
    assert d.reopen().query("t0") == expected
    outcome, rows, _ = d.run(Resume("t0", value="b"))
    assert (outcome, rows) == ("completed", [("t0", 3, "b"), ("t0", 4, None)])
    assert d.case.query("t0") == StateView.of(WORKFLOW, (1, 2, 3, 4), {2: "a", 3: "b"}, None)


def _stored(d) -> list:
    """Every row of every table of the case's SQLite store: what tamper must change."""
    (path,) = [p for p in d.workdir.iterdir() if p.suffix == ".sqlite"]
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type='table'")]
        return [(t, conn.execute(f'select * from "{t}"').fetchall()) for t in sorted(tables)]
    finally:
        conn.close()


@pytest.mark.parametrize("name", IN_PROCESS)
@pytest.mark.parametrize("how", ["corrupt", "invalid", "forged"])
def test_tamper_changes_the_stored_content(make_driver, name, how):
    d = make_driver(name)
    d.run(Start("t0"))
    d.run(Resume("t0", value="a"))
    before_rows, before_view = _stored(d), d.case.query("t0")
    d.case.tamper("t0", how)
    assert _stored(d) != before_rows
    if how == "corrupt":
        with pytest.raises(Unreadable):
            d.case.query("t0")
    elif how == "invalid":
        view = d.case.query("t0")
        assert not view.is_valid(WORKFLOW)
    else:
        view = d.case.query("t0")
        assert view != before_view and view.is_valid(WORKFLOW)
        assert view.answers != before_view.answers  # forge changes the last answer


@pytest.mark.parametrize("name", IN_PROCESS)
def test_clone_store_copies_the_bytes(make_driver, name, tmp_path):
    d = make_driver(name)
    d.run(Start("t0"))
    dest = tmp_path / "clone"
    dest.mkdir()
    d.case.clone_store(dest)
    copied = sorted(p.name for p in dest.iterdir())
    assert copied
    for fname in copied:
        if fname.endswith(".sqlite"):
            assert (dest / fname).read_bytes() == (d.workdir / fname).read_bytes()
    twin = d.adapter.open(d.variant, WORKFLOW, dest)
    try:
        assert twin.query("t0") == d.case.query("t0")
    finally:
        twin.close()


@pytest.mark.parametrize("name", CORE)
def test_fork_branch_is_queryable(make_driver, name):
    d = make_driver(name)
    d.run(Start("t0"))
    d.run(Resume("t0", value="a"))
    outcome, rows, _ = d.run(Fork("t0", gate=2, value="b", new_thread="f1"))
    assert (outcome, rows) == ("interrupted", [("f1", 2, "b")])
    assert d.case.query("f1") == StateView.of(WORKFLOW, (1, 2), {2: "b"}, 3)
    assert d.case.query("t0") == StateView.of(WORKFLOW, (1, 2), {2: "a"}, 3)


@pytest.mark.parametrize("name", IN_PROCESS)
def test_bad_output_is_stored_or_refused(make_driver, name, record_property):
    d = make_driver(name)
    outcome, rows, error = d.run(Start("t0", bad_output=1))
    assert rows == [("t0", 1, None)]
    stored = "<bad>" in d.case.query("t0").done
    refused = outcome == "rejected"
    record_property("bad_output", "stored" if stored else "refused")
    assert stored or refused, (outcome, d.case.query("t0"), error)


@pytest.mark.parametrize("name", SERVER)
def test_server_resume_of_a_finished_handler_is_refused_by_the_server(make_driver, name):
    d = make_driver(name)
    d.run(Start("t0"))
    d.run(Resume("t0", value="a"))
    d.run(Resume("t0", value="b"))
    outcome, rows, error = d.run(Resume("t0", value="a"))
    assert (outcome, rows) == ("rejected", [])
    if d.variant.options.get("api") == "http":  # the route's status, in the server's words
        assert type(error).__name__ == "Refused" and "409" in str(error), error
    else:
        assert "HandlerCompleted" in type(error).__name__


@pytest.mark.parametrize("name", IN_PROCESS)
@pytest.mark.parametrize("part", ["done", "answer"])
def test_tamper_forged_by_part_writes_that_part_of_the_state(make_driver, name, part):
    """The stored state as ``forge(part)`` says (done log, answers); the pending-gate record
    is declared n/a (``Capabilities.forge_parts``: LlamaIndex derives the pause, it stores no
    record of it alone)."""
    from adapters.protocol import Durable, forge, forge_parts

    d = make_driver(name)
    d.run(Start("t0"))
    d.run(Resume("t0", value="a"))
    view = d.case.query("t0")
    durable = Durable(view.done, view.answers, None)
    choice = next(p for p in forge_parts(WORKFLOW, durable) if p.startswith(part))
    d.case.tamper("t0", "forged", choice)
    got, fake = d.case.query("t0"), forge(WORKFLOW, durable, choice)
    assert (got.done, got.answers) == (fake.done, fake.answers)
    caps = d.adapter.capabilities(d.variant)
    assert "pending" not in caps.forge_parts and "forged pending" in caps.not_expressible
