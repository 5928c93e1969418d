"""A store author's test suite: fuzz a pydantic-graph state persistence with resumefuzz.

This is the complete pydantic-graph example of docs/stores.md; CI runs it (tox -e
adapter-pydantic-graph).  Put the same lines in your own tests with your persistence in
``make_persistence``; run ``pytest`` as usual.  The persistence here is pydantic-graph's own
``FileStatePersistence`` on a JSON file, standing in for yours.
"""

from __future__ import annotations

import json
import shutil

import pytest
from hypothesis import Phase, settings

import resumefuzz.pytest
from resumefuzz import StoreContext, StoreHandle, TamperTarget

# Your suite's Hypothesis profile decides the budget, the database, derandomization and the
# phases.  This one is small so that the example runs in about a minute in CI, without shrinking
# (a failure then reports the trace as found; drop `phases=` for minimal traces).
settings.register_profile("my-persistence", max_examples=5, stateful_step_count=6,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate])
settings.load_profile("my-persistence")


def make_persistence(ctx: StoreContext) -> StoreHandle:
    """Called once per graph run (a pydantic-graph persistence holds one run), in every worker
    process that opens it: ``ctx.workdir`` is that run's own directory, and the same directory
    must reopen the same run."""
    from pydantic_graph.persistence.file import FileStatePersistence

    path = ctx.workdir / "run.json"

    def clone(dest: StoreContext) -> None:
        """Twin recovery: copy the run so that make_persistence(dest) opens an identical one."""
        if path.exists():
            shutil.copyfile(path, dest.workdir / path.name)

    def tamper(target: TamperTarget) -> str:
        """Damage the stored run directly (not through the persistence): JSON cut in half."""
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        return f"run {target.thread_id}: run.json cut to {len(data) // 2} bytes"

    def read():
        """The run's snapshots as stored (needed only if your load_all() is not implemented;
        given, resumefuzz reads the content itself, not what the framework accepts)."""
        return json.loads(path.read_bytes()) if path.exists() else None

    return StoreHandle(store=FileStatePersistence(path), clone=clone, tamper=tamper,
                       tamper_hows=frozenset({"corrupt"}), tamper_scope="thread", read=read)


make_persistence.store_name = "mypersistence"  # the variants are called store-mypersistence-...


# 1. Hypothesis's idiom: one test per variant (how a run starts, resumes and recovers).
TestMyPersistence = resumefuzz.pytest.store_test(
    "pydantic-graph", make_persistence,
    variants=("start_initialize-resume_ifp-recover_ifp",), op_timeout=20,
    reports_dir=".resumefuzz/reports", corpus_dir=".resumefuzz/corpus",
).TestCase


# 2. A fixture, when you want to choose the variants test by test.
@pytest.fixture(scope="module")
def fuzz():
    return resumefuzz.pytest.store_test("pydantic-graph", make_persistence, op_timeout=20)


def test_a_run_started_with_graph_iter(fuzz):
    fuzz.check("start_iter-resume_ifp-recover_ifp")
