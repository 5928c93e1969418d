"""Bring your own store (``--store``) on CrewAI Flows: the factory's ``FlowPersistence`` drives
real flows.

``RESUMEFUZZ_STORES`` (comma-separated factory paths) selects the stores; the default is
CrewAI's own ``SQLiteFlowPersistence`` through the factory protocol
(``resumefuzz.stores.crewai_sqlite``); ``tox -e adapter-store-crewaisql-postgres`` and
``-mariadb`` set it to ``crewai-persistence-sql`` on that server (``resumefuzz.stores.crewai_sql``).
A server that does not answer is a failure under ``CI=true`` (and in the tox environment,
``RESUMEFUZZ_NO_SKIP=1``), a counted skip elsewhere.

Machinery only, never a verdict: what the store holds is what the harness reads, a clone holds
the same state and is independent, a tamper damages what the next read sees, and a bounded
campaign runs end to end.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from crewai_test_support import Harness
from store_testkit import ROOT, bounded_campaign, tamper_shows

from adapters.protocol import Start, StateView, Workflow
from adapters.storeprotocol import StoreFactoryError
from fuzz.testing import check_standalone

DEFAULT = "resumefuzz.stores.crewai_sqlite:sqlite_persistence"
STORES = [s for s in (os.environ.get("RESUMEFUZZ_STORES") or DEFAULT).split(",") if s]
_PREPARED: dict = {}
# Read before the adapter's environment is applied: CrewAI's sandbox sets CI=true itself (it is
# one of the switches that turn off its version check).
UNDER_CI = os.environ.get("CI") == "true"


def _prepare_all() -> None:
    """Probe every store before any flow runs here: the probe forks, and CrewAI starts its
    event-bus threads with the first flow."""
    from adapters.crewai import CrewAIAdapter

    for path in STORES:
        a = CrewAIAdapter()
        os.environ.update(a.environment())
        try:
            a.use_store(path)
            a.prepare()
            _PREPARED[path] = a
        except StoreFactoryError as exc:
            _PREPARED[path] = exc


@pytest.fixture(scope="module", params=STORES)
def store_adapter(request):
    pytest.importorskip("crewai", reason="needs constraints/crewai.txt")
    if ("stores.crewai_sql:" in request.param
            and importlib.util.find_spec("crewai_persistence_sql") is None):
        pytest.skip("crewai-persistence-sql is not installed (tox -e adapter-store-crewaisql-postgres)")
    if not _PREPARED:
        _prepare_all()
    found = _PREPARED[request.param]
    if isinstance(found, StoreFactoryError):
        if UNDER_CI:
            pytest.fail(f"the store's server is required under CI: {found}")
        pytest.skip(f"the store's server does not answer here: {found}")
    return found


@pytest.fixture
def harness(store_adapter, tmp_path):
    saved = (os.getcwd(), sys.stdout, sys.stderr)
    opened = []

    def make(workflow, workdir):
        workdir.mkdir(parents=True, exist_ok=True)
        variant = store_adapter.variants()[0]
        h = Harness(store_adapter, variant, workflow, workdir,
                    workdir.parent / f"ledger{len(opened)}.sqlite")
        sys.stdout, sys.stderr = saved[1], saved[2]
        opened.append(h)
        return h

    yield make
    for h in opened:
        h.case.close()
        h.ledger.close()
    for h in opened:
        store_adapter.cleanup(h.variant, h.workdir)
    os.chdir(saved[0])
    sys.stdout, sys.stderr = saved[1], saved[2]


def test_variants_name_the_store_package_and_version(store_adapter):
    store = store_adapter._store
    (variant,) = store_adapter.variants()
    assert variant.name == f"store-{store.name}-persist"
    assert f"{store.distribution} {store.version}" in variant.description
    assert variant.options["store_version"] == store.version != "not installed"
    assert store_adapter.versions()["store-factory"] == store.path


def test_the_probe_says_whether_the_store_keeps_pending_feedback(store_adapter):
    overrides = store_adapter.store_probe().info["pending_feedback"]
    assert set(overrides) == {"save_pending_feedback", "load_pending_feedback",
                              "clear_pending_feedback"}


def test_what_the_harness_reads_is_what_the_store_holds(harness, tmp_path):
    wf = Workflow(2, frozenset(), ("a", "b"))
    h = harness(wf, tmp_path / "c" / "root")
    assert h.case.query("t0") == StateView.of(wf, (), {}, None)
    outcome, _ = h.do(Start("t0"))
    assert outcome == "completed"
    fid = h.case.side.get("t0")["fid"]
    held = h.case.custom.store.load_state(fid)
    assert held is not None and held["done"] == [1, 2]
    assert h.case.query("t0") == StateView.of(wf, (1, 2), {}, None)


def test_a_gate_pause_is_read_through_load_pending_feedback(harness, tmp_path):
    wf = Workflow(2, frozenset({1}), ("a", "b"))
    h = harness(wf, tmp_path / "c" / "root")
    outcome, _ = h.do(Start("t0"))
    assert outcome == "interrupted"
    fid = h.case.side.get("t0")["fid"]
    pending = h.case.custom.store.load_pending_feedback(fid)
    expected = 1 if pending is not None else None  # whatever the store keeps, read as it is
    assert h.case.query("t0").pending == expected


def test_a_clone_holds_the_same_state_and_is_independent(harness, tmp_path):
    wf = Workflow(2, frozenset(), ("a", "b"))
    h = harness(wf, tmp_path / "c" / "root")
    h.do(Start("t0"))
    stored = h.case.query("t0")
    twin_dir = tmp_path / "twin" / "root"
    twin_dir.mkdir(parents=True)
    h.case.clone_store(twin_dir)
    twin = harness(wf, twin_dir)
    assert twin.case.query("t0") == stored
    twin.case.tamper("t0", "corrupt")
    assert h.case.query("t0") == stored  # the original is untouched


def test_tamper_corrupt_damages_what_the_next_read_sees(harness, tmp_path):
    h = harness(Workflow(2, frozenset(), ("a", "b")), tmp_path / "c" / "root")
    h.do(Start("t0"))
    tamper_shows(h.case, "t0")


def test_a_bounded_campaign_runs_on_the_store(store_adapter, in_tmp):
    store = store_adapter._store
    bounded_campaign("crewai", store, f"store-{store.name}-persist", in_tmp, op_timeout=120)


def test_the_script_of_the_store_s_corpus_entry_builds_it_and_exits_1(store_adapter, tmp_path):
    """``resumefuzz report`` on a copy of the store's corpus entry (in a fresh interpreter: the
    replay forks workers, and a flow ran here already) writes a checked script that builds the
    store by its factory's ``ScriptStore`` and imports nothing of resumefuzz; run on its own,
    without our PYTHONPATH, it exits 1.  A store with no entry of its own (CrewAI's
    ``SQLiteFlowPersistence``, the default here) gets another store's entry, the same trace: it
    keeps the pending feedback that store loses, so its script exits 0."""
    from adapters import storefactory

    store = store_adapter._store
    variant = f"store-{store.name}-persist"
    entries = sorted((ROOT / "corpus" / "crewai" / variant).glob("*.json"))
    own = bool(entries)
    if not own:  # the SQL store's StateMismatch, on this store
        entries = sorted((ROOT / "corpus" / "crewai").glob("store-sql*-persist/StateMismatch-*.json"))
        assert entries, "no StateMismatch entry of a crewai-persistence-sql store left"
    recipe = storefactory.script_of(store)
    assert recipe is not None, f"{store.path} declares no store_script"
    copy = tmp_path / "corpus" / variant / entries[0].name
    copy.parent.mkdir(parents=True)
    doc = json.loads(entries[0].read_text())
    doc["variant"] = variant
    doc["versions"]["store-factory"] = store.path
    copy.write_text(json.dumps(doc))
    done = subprocess.run(
        [sys.executable, "-m", "fuzz", "report", str(copy), "--store", store.path,
         "--reports", str(tmp_path / "reports"), "--json"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1])["checked"], done.stdout
    (md,) = (tmp_path / "reports").rglob("*.md")
    script = re.search(r"```python\n(.*?)```", md.read_text(), re.S)[1]
    check_standalone(script, ("'t0'", "H."))
    assert f"def {recipe.build}(" in script and "set_flow_persistence_factory(" in script
    path = tmp_path / "repro.py"
    path.write_text(script)
    run = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    if own:
        assert run.returncode == 1 and "DEFECT SHOWS" in run.stdout, run.stdout + run.stderr[-3000:]
    else:
        assert run.returncode == 0 and "no defect" in run.stdout, run.stdout + run.stderr[-3000:]


SUITE = Path(__file__).with_name("store_suite_crewai.py")


def test_store_test_runs_from_a_store_authors_suite(store_adapter, tmp_path):
    """``resumefuzz.pytest.store_test("crewai", factory)`` in a fresh pytest: it passes, or it
    fails with the category, the report's path and the replay line; a finding CrewAI's own
    ``SQLiteFlowPersistence`` shows too is set aside, loudly."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", str(SUITE), "-q", "-s", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=1200,
        env={**os.environ, "RESUMEFUZZ_SUITE_STORE": store_adapter._store.path,
             "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])})
    out = done.stdout + done.stderr
    assert done.returncode in (0, 1), out[-3000:]
    if done.returncode == 1:
        assert "StoreFailure" in out and "report: .resumefuzz/reports/crewai/" in out, out[-3000:]
        assert list((tmp_path / ".resumefuzz" / "reports").rglob("*.md"))
    for line in out.splitlines():
        if line.startswith("resumefuzz: [") and "set aside" in line:
            assert "on the framework's own persist-sqlite" in line or "verdict D" in line
