"""Bring your own saver (``--store``) on LangGraph: the factory's saver drives real cases.

``RESUMEFUZZ_STORES`` (comma-separated factory paths) selects the stores; the default is
LangGraph's own SQLite savers through the factory protocol (``resumefuzz.stores.langgraph_sqlite``:
the sync saver and the ``async def`` one).  Each third-party store's tox environment
(``adapter-store-<name>``) sets it to that store's factory, against its real server.

Machinery only, never a verdict: what a run stores is read back, a clone holds the same state,
a tamper damages what the next read sees, and a bounded campaign runs end to end.  And the
reproduction scripts of findings on the store: built with the factory's ``ScriptStore``, they
stand alone and show LangGraph's defects on it (exit 1).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langgraph_testkit import run_op
from store_testkit import bounded_campaign

from adapters.langgraph import LangGraphAdapter
from adapters.protocol import Resume, Start, StateView, Unreadable, Workflow
from fuzz import reprocheck
from fuzz.rate import Rate
from fuzz.testing import check_standalone
from fuzz.trace import load_trace

DEFAULT = ("resumefuzz.stores.langgraph_sqlite:sqlite_saver,"
           "resumefuzz.stores.langgraph_sqlite:async_sqlite_saver")
STORES = [s for s in (os.environ.get("RESUMEFUZZ_STORES") or DEFAULT).split(",") if s]


@pytest.fixture(scope="module", params=STORES)
def store_adapter(request):
    pytest.importorskip("langgraph", reason="needs the LangGraph pins: constraints/langgraph.txt")
    a = LangGraphAdapter()
    os.environ.update(a.environment())
    a.use_store(request.param)
    a.prepare()  # probes the factory once, in a forked child
    return a


@pytest.fixture
def opened(store_adapter, tmp_path):
    cases = []

    def _open(name_suffix, wf, workdir):
        v = next(v for v in store_adapter.variants() if v.name.endswith(name_suffix))
        workdir.mkdir(exist_ok=True)
        case = store_adapter.open(v, wf, workdir)
        cases.append((v, case, workdir))
        return v, case

    yield _open
    for _, case, _ in cases:
        case.close()
    for v, workdir in {str(w): (v, w) for v, _, w in cases}.values():  # once per store
        store_adapter.cleanup(v, workdir)


def test_variants_name_the_store_package_and_version(store_adapter):
    store = store_adapter._store
    names = [v.name for v in store_adapter.variants()]
    assert names and all(n.startswith(f"store-{store.name}-") for n in names)
    v = store_adapter.variants()[0]
    assert f"{store.distribution} {store.version}" in v.description
    assert store_adapter.versions()[store.distribution] == store.version != "not installed"
    assert store_adapter.versions()["store-factory"] == store.path


def test_a_run_is_read_back_through_the_saver(opened, ledger, tmp_path):
    wf = Workflow(3, frozenset({2}), ("a", "b"))
    _, case = opened("graph-sync-head-update", wf, tmp_path / "c")
    assert case.query("t0") == StateView.of(wf, (), {}, None)
    outcome, rows, _ = run_op(case, Start("t0"), 0, ledger)
    assert outcome == "interrupted" and rows == [("t0", 1, None)]
    assert (case.query("t0").done, case.query("t0").pending) == ((1,), 2)
    outcome, rows, _ = run_op(case, Resume("t0", value="a"), 1, ledger)
    assert outcome == "completed" and rows == [("t0", 2, "a"), ("t0", 3, None)]
    assert case.query("t0") == StateView.of(wf, (1, 2, 3), {2: "a"}, None)


def test_a_reopened_worker_and_a_clone_see_the_same_store(store_adapter, opened, ledger,
                                                          tmp_path):
    if "twin_recover" not in store_adapter.capabilities(store_adapter.variants()[0]).operations:
        pytest.fail("every bundled factory offers clone")
    wf = Workflow(2, frozenset({1}), ("a", "b"))
    _, case = opened("graph-sync-head-update", wf, tmp_path / "c")
    run_op(case, Start("t0"), 0, ledger)
    stored = case.query("t0")
    case.close()  # the worker is gone (an embedded store may refuse a second open per process)
    _, again = opened("graph-sync-head-update", wf, tmp_path / "c")  # its replacement
    assert again.query("t0") == stored
    (tmp_path / "twin").mkdir()
    again.clone_store(tmp_path / "twin")
    _, twin = opened("graph-sync-head-update", wf, tmp_path / "twin")
    assert twin.query("t0") == stored
    outcome, _, _ = run_op(twin, Resume("t0", value="b"), 1, ledger)
    assert outcome == "completed" and again.query("t0") == stored  # the copy is independent


def test_tamper_corrupt_damages_what_the_next_read_sees(opened, ledger, tmp_path):
    wf = Workflow(2, frozenset({1}), ("a", "b"))
    _, case = opened("graph-sync-head-update", wf, tmp_path / "c")
    run_op(case, Start("t0"), 0, ledger)
    before = case.query("t0")
    case.tamper("t0", "corrupt")
    assert case.log[-1].startswith("tamper: corrupt:")
    try:
        after = case.query("t0")
    except Unreadable:
        return  # the saver refuses the damaged bytes loudly
    assert after != before, "the tamper left the stored state as it was"


def test_a_bounded_campaign_runs_on_the_store(store_adapter, in_tmp):
    """In a fresh process: this one ran cases in process, and has LangGraph's threads."""
    store = store_adapter._store
    bounded_campaign("langgraph", store, f"store-{store.name}-graph-sync-head-update", in_tmp)


CORPUS = Path(__file__).resolve().parents[3] / "corpus" / "langgraph"
# Retired corpus entries kept for script paths (test_langgraph_repro.py says which).
DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.parametrize("folder, category, needle", [
    # a bad output a TypedDict graph accepts, on any saver: straight lines on the store (n/a
    # since issue 41, LangGraph validating no TypedDict; the script path stays, from DATA)
    ("sqlite-graph-sync-head-update", "InvalidPersist", "graph = build_graph("),
    # a forced race: the racers' first read waits in a subclass of the store's saver class
    ("sqlite-func-sync-head-update", "LostUpdate", "_saver(HeldSaver)"),
])
def test_a_finding_on_the_store_has_a_checked_standalone_script(store_adapter, folder,
                                                                category, needle):
    """A LangGraph defect the built-in SQLite saver shows, replayed on this store's variant of
    the same spelling: the script builds the store with its ``ScriptStore`` and exits 1."""
    store = store_adapter._store
    found = sorted((p for p in [*(CORPUS / folder).glob(f"{category}-*.json"),
                                *(DATA / folder).glob(f"{category}-*.json")]
                    if load_trace(p).status == "FAILED"),
                   key=lambda p: len(load_trace(p).operations))
    assert found, f"no FAILED {category} entry left in {folder}"
    trace = load_trace(found[0])
    name = f"store-{store.name}-" + folder.removeprefix("sqlite-")
    v = next(v for v in store_adapter.variants() if v.name == name)
    repro = reprocheck.reproduce(store_adapter, v, trace.with_(variant=name), runs=1)
    assert repro.checked and repro.reproduces == Rate(1, 1), (repro.script, repro.outputs)
    assert needle in repro.script, repro.script
    check_standalone(repro.script, ("rf_branch",), as_words=True)
