"""Bring your own store (``--store``) on pydantic-graph: the factory's persistence drives real cases.

``RESUMEFUZZ_STORES`` (comma-separated factory paths) selects the stores; the default is
pydantic-graph's own ``FileStatePersistence`` through the factory protocol
(``resumefuzz.stores.pydantic_graph_file``), plus ``pydantic-graph-persistence``'s
``LatestStatePersistence`` when that package is installed (``tox -e adapter-store-latest``).

Machinery only, never a verdict: a run is read back, a reopened worker and a clone hold the same
state, a tamper damages what the next read sees, what the store cannot do is n/a with a reason,
a bounded campaign and ``resumefuzz.pytest.store_test`` run end to end.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from store_testkit import bounded_campaign, tamper_shows

from adapters.protocol import Resume, Start, StateView, Workflow
from adapters.storeprotocol import StoreFactoryError
from fuzz.rate import Rate

DEFAULT = ["resumefuzz.stores.pydantic_graph_file:file_persistence"]
if importlib.util.find_spec("pydantic_graph_persistence") is not None:
    DEFAULT.append("resumefuzz.stores.pydantic_graph_latest:latest_persistence")
STORES = [s for s in (os.environ.get("RESUMEFUZZ_STORES") or ",".join(DEFAULT)).split(",") if s]


@pytest.fixture(scope="module", params=STORES)
def store_adapter(request):
    pytest.importorskip("pydantic_graph", reason="needs constraints/pydantic_graph.txt")
    from adapters.pydantic_graph import PydanticGraphAdapter

    a = PydanticGraphAdapter()
    os.environ.update(a.environment())
    try:
        a.use_store(request.param)
    except StoreFactoryError as exc:  # the store's package is not installed here
        pytest.skip(str(exc))
    a.prepare()  # probes the factory once, in a forked child
    return a


@pytest.fixture
def harness(store_adapter, tmp_path):
    from fuzz.internal.hooks import EngineHooks
    from fuzz.internal.ledger import Ledger

    cases = []
    ledger = Ledger(tmp_path / "ledger.sqlite")

    class Opened:
        def __init__(self, suffix, wf, workdir):
            self.variant = next(v for v in store_adapter.variants() if v.name.endswith(suffix))
            workdir.mkdir(exist_ok=True)
            self.case = store_adapter.open(self.variant, wf, workdir)
            self.seq = 0
            cases.append((self.variant, self.case, workdir))

        def do(self, op):
            self.seq += 1
            hooks = EngineHooks(op, seq=self.seq, branch=op.thread, ledger=ledger)
            try:
                outcome = self.case.run(op, hooks)
                hooks.run_returned()
            except Exception:  # noqa: BLE001 - the engine calls any exception a refusal
                outcome = "rejected"
            return outcome

    yield Opened
    for _, case, _ in cases:
        case.close()
    for v, workdir in {str(w): (v, w) for v, _, w in cases}.values():
        store_adapter.cleanup(v, workdir)


INIT = "start_initialize-resume_ifp-recover_ifp"


def test_variants_name_the_store_package_and_version(store_adapter):
    store = store_adapter._store
    variants = store_adapter.variants()
    assert variants and all(v.name.startswith(f"store-{store.name}-start_") for v in variants)
    assert all(f"{store.distribution} {store.version}" in v.description for v in variants)
    assert all(v.options["store_version"] == store.version != "not installed" for v in variants)
    assert store_adapter.versions()["store-factory"] == store.path


def test_what_the_store_cannot_do_is_na_with_the_reason(store_adapter):
    probe = store_adapter.store_probe()
    caps = store_adapter.capabilities(store_adapter.variants()[0])
    assert "interrupt_identity" in caps.not_expressible
    if probe.info["history"]:
        assert "fork" in caps.operations
    else:  # LatestStatePersistence: load_all raises NotImplementedError
        assert "fork" not in caps.operations
        assert "NotImplementedError" in caps.not_expressible["fork"]
        assert probe.read, "a store without history must hand the harness a reader"
    assert caps.tamper_hows == probe.tamper_hows


def test_a_run_is_read_back_through_the_store(harness, tmp_path):
    wf = Workflow(3, frozenset({2}), ("a", "b"))
    h = harness(INIT, wf, tmp_path / "c")
    assert h.case.query("t0") == StateView.of(wf, (), {}, None)
    assert h.do(Start("t0")) == "interrupted"
    assert h.case.query("t0") == StateView.of(wf, (1,), {}, 2)
    assert h.do(Resume("t0", value="a")) == "completed"
    assert h.case.query("t0") == StateView.of(wf, (1, 2, 3), {2: "a"}, None)


def test_a_reopened_worker_and_a_clone_see_the_same_store(store_adapter, harness, tmp_path):
    wf = Workflow(2, frozenset({1}), ("a", "b"))
    first = harness(INIT, wf, tmp_path / "c")
    assert first.do(Start("t0")) == "interrupted"
    stored = first.case.query("t0")
    first.case.close()
    again = harness(INIT, wf, tmp_path / "c")  # the replacement of a killed worker
    assert again.case.query("t0") == stored
    (tmp_path / "twin").mkdir()
    again.case.clone_store(tmp_path / "twin")
    twin = harness(INIT, wf, tmp_path / "twin")
    assert twin.case.query("t0") == stored
    assert twin.do(Resume("t0", value="b")) == "completed"
    assert again.case.query("t0") == stored  # the copy is independent


def test_tamper_corrupt_damages_what_the_next_read_sees(harness, tmp_path):
    h = harness(INIT, Workflow(2, frozenset({1}), ("a", "b")), tmp_path / "c")
    h.do(Start("t0"))
    tamper_shows(h.case, "t0")


def test_an_async_factory_is_refused_in_one_line():
    from adapters import storefactory
    from adapters.pydantic_graph import PydanticGraphAdapter

    async def make(ctx):  # pragma: no cover - never called
        return None

    path = storefactory.register(make)
    with pytest.raises(StoreFactoryError, match="plain `def` factory"):
        PydanticGraphAdapter().use_store(path)


def test_a_bounded_campaign_runs_on_the_store(store_adapter, in_tmp):
    store = store_adapter._store
    bounded_campaign("pydantic-graph", store, f"store-{store.name}-{INIT}", in_tmp, examples=6)


def test_store_test_runs_a_variant_from_pytest(store_adapter, in_tmp):
    """``resumefuzz.pytest.store_test("pydantic-graph", factory)``: the test either passes or
    fails with a report path; a finding the built-in FileStatePersistence shows too is set
    aside (``framework_findings``)."""
    from hypothesis import Phase, settings

    import resumefuzz.pytest as rp
    from adapters import storefactory

    factory = storefactory.load(store_adapter._store.path).func
    fuzz = rp.store_test("pydantic-graph", factory, op_timeout=30)
    assert INIT in fuzz.variant_names()
    case = fuzz.TestCase
    assert hasattr(case, "test_" + INIT.replace("-", "_"))
    settings.register_profile("store-test-small", max_examples=3, stateful_step_count=4,
                              derandomize=True, database=None,
                              phases=[Phase.explicit, Phase.generate])
    settings.load_profile("store-test-small")  # what a store author's suite does
    try:
        fuzz.check(INIT)
    except rp.StoreFailure as failure:
        assert "report: " in str(failure)
    finally:
        settings.load_profile("default")
    for variant, _, report in fuzz.framework_findings:
        assert variant.endswith(INIT) and Path(report).exists()


# -- reproduction scripts on a custom store (its factory's ScriptStore) ---------------------------

LATEST = "resumefuzz.stores.pydantic_graph_latest:latest_persistence"
CORPUS = Path(__file__).resolve().parents[3] / "corpus" / "pydantic-graph"
OURS = ("resumefuzz", "adapters", "fuzz", "refmodel", "hypothesis")
# Runs a script as ``python script.py`` does, then says which of our modules it imported: in a
# tox environment resumefuzz is installed, so a stray import would not fail on its own.
RUN_AND_LIST = f"""
import runpy, sys
try:
    runpy.run_path(sys.argv[1], run_name="__main__")
    code = 0
except SystemExit as exc:
    code = exc.code
print("IMPORTED", sorted(m for m in sys.modules if m.split(".")[0] in {OURS!r}))
sys.exit(code)
"""


# Only where the environment names the latest store (adapter-store-latest): its package is
# installed nowhere else, and an adapter environment turns a skip into a failure.
if LATEST in STORES:

    @pytest.fixture(scope="module")
    def latest_adapter():
        pytest.importorskip("pydantic_graph_persistence", reason="tox -e adapter-store-latest")
        from adapters.pydantic_graph import PydanticGraphAdapter

        a = PydanticGraphAdapter()
        os.environ.update(a.environment())
        a.use_store(LATEST)
        a.prepare()
        return a


    def _latest_entry(op: str):
        """A FAILED defect entry of the latest store whose finding is at an ``op``, one that also
        tampers and has two runs if there is one (the most the script composes: each run its own
        directory, the store's own tamper function)."""
        from fuzz.testing import defect_entries
        from fuzz.trace import load_trace

        traces = [load_trace(p) for p in defect_entries(CORPUS, op) if "/store-latest-" in str(p)]
        if not traces:
            pytest.skip(f"no store-latest entry at a {op!r} in the corpus")
        return max(traces, key=lambda t: ("tamper" in [o.name for o in t.operations],
                                          len(t.operations)))


    def _run(script: str, tmp_path) -> tuple:
        import subprocess
        import sys

        path = tmp_path / "repro.py"
        path.write_text(script)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        done = subprocess.run([sys.executable, "-c", RUN_AND_LIST, str(path)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        return done.returncode, done.stdout


    def test_the_script_of_a_custom_store_entry_builds_the_store_and_shows_the_defect(
            latest_adapter, tmp_path):
        """The script builds LatestStatePersistence with the ScriptStore's own functions (pasted,
        no resumefuzz), writes the race as its racers one after the other on the run's file, and
        exits 1: the later racer answers the next gate too."""
        from fuzz import reprocheck
        from fuzz.testing import check_standalone

        trace = _latest_entry("race")
        variant = next(v for v in latest_adapter.variants() if v.name == trace.variant)
        repro = reprocheck.reproduce(latest_adapter, variant, trace, runs=0)
        assert repro.checked, repro.script
        script = repro.script
        assert "def latest_persistence(cls=LatestStatePersistence):" in script
        assert "p = latest_persistence()" in script and "custom_persistence" not in script
        assert "from pydantic_graph_persistence import LatestStatePersistence" in script
        if any(op.name == "tamper" for op in trace.operations):  # the factory's tamper, as code
            assert "corrupt()" in script and "use_run_dir('run-1')" in script
        check_standalone(script, ("store_factory", "StoreHandle"))
        code, out = _run(script, tmp_path)
        assert code == 1 and "DEFECT SHOWS" in out, out
        assert "IMPORTED []" in out, out


    def test_the_script_on_a_custom_store_exits_0_where_the_framework_is_right(latest_adapter):
        from fuzz import reprocheck
        from fuzz.testing import allowed_resume_trace

        trace = allowed_resume_trace(_latest_entry("race"))
        variant = next(v for v in latest_adapter.variants() if v.name == trace.variant)
        repro = reprocheck.reproduce(latest_adapter, variant, trace, runs=1)
        assert repro.checked and repro.reproduces == Rate(0, 1), (repro.outputs, repro.script)


    def test_the_script_store_keeps_the_factory_s_file(tmp_path, monkeypatch):
        """``SCRIPT`` (what a script builds the store with) and the factory share one format: what
        one saves the other loads, and ``corrupt`` cuts the file as the factory's tamper does."""
        import asyncio

        pytest.importorskip("pydantic_graph_persistence", reason="tox -e adapter-store-latest")
        from adapters import storefactory
        from adapters.storeprotocol import TamperTarget
        from resumefuzz.stores.scripts import pydantic_graph_latest as recipe

        factory = storefactory.load(LATEST)
        assert storefactory.script_of(factory) is recipe.SCRIPT
        monkeypatch.setattr(recipe, "WORKDIR", str(tmp_path))
        handle = factory.func(storefactory.context(tmp_path, "pydantic-graph"))
        ours, theirs = recipe.latest_persistence(), handle.store
        snapshot = {"kind": "end", "state": {"done": [1]}, "id": "x"}
        assert asyncio.run(ours.load()) is None is asyncio.run(theirs.load())
        asyncio.run(ours.save(snapshot))
        assert asyncio.run(theirs.load()) == snapshot == handle.read()
        asyncio.run(theirs.save({**snapshot, "id": "y"}))
        assert asyncio.run(ours.load())["id"] == "y"
        stored = (tmp_path / "latest.json").read_bytes()
        recipe.corrupt()
        by_script = (tmp_path / "latest.json").read_bytes()
        (tmp_path / "latest.json").write_bytes(stored)
        handle.tamper(TamperTarget(how="corrupt", thread_id="run-1"))
        assert by_script == (tmp_path / "latest.json").read_bytes() == stored[: len(stored) // 2]
