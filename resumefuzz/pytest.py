"""Fuzz your store from your own test suite.

In the style of Hypothesis's stateful machines (``TestX = Machine.TestCase``)::

    # tests/test_my_saver.py
    import resumefuzz.pytest
    from mypkg.savers import make_saver        # StoreContext -> saver | StoreHandle

    TestMySaver = resumefuzz.pytest.store_test("langgraph", make_saver).TestCase

or with a fixture, one test per variant you care about::

    @pytest.fixture(scope="module")
    def fuzz():
        return resumefuzz.pytest.store_test("langgraph", make_saver)

    def test_graph_api(fuzz):
        fuzz.check("graph-sync-head-update")

Each test runs the differential state machine on one variant of your store (forked workers,
SIGKILL crash points, races, forks, tampering where your ``StoreHandle`` allows it).  It runs
under the Hypothesis settings profile your suite loaded (``max_examples``, ``database``,
``derandomize``, ``phases``...): ``settings.register_profile`` / ``--hypothesis-profile`` work as
for any Hypothesis test.  Only what a differential run of real frameworks in worker processes
needs is fixed: no deadline, no health checks, no explain phase.

A failure writes a corpus entry and a shrink report (``reports_dir``, default
``.resumefuzz/reports``) and fails with the category, the report's path and the standalone
script that shows the defect with the framework's own API.

**Yours or the framework's?**  With ``baseline=True`` (the default) every failure is replayed
on the matching variant over the framework's own store first (LangGraph's SQLite saver,
pydantic-graph's ``FileStatePersistence``, CrewAI's ``SQLiteFlowPersistence``: see
``Adapter.baseline_variant``; ``fuzz/baseline.py``): a failure
that reproduces there is the framework's, not your store's (a free race counts when the
built-in saver breaks the same property at the same step: which racer does what is timing,
``same_defect``).  It is then *not* hidden: it is
printed (and listed in ``framework_findings``), its category is set aside for the rest of the
test so the search goes on, and the test fails only on what the built-in saver does not show.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

FRAMEWORK_ALIASES = {"pydantic_graph": "pydantic-graph"}


class StoreFailure(AssertionError):
    """resumefuzz found a divergence on your store; the message says where to look in the
    store, and gives the report and the replay line."""


@dataclass(kw_only=True)
class StoreTest:
    """The fuzz test of one store factory on one framework (see the module docstring)."""

    framework: str
    factory: object
    variants: tuple = ()  # variant suffixes ("graph-sync-head-update"); empty: every one
    op_timeout: float = 60.0
    reports_dir: Path = Path(".resumefuzz/reports")
    corpus_dir: Path = Path(".resumefuzz/corpus")
    baseline: bool = True
    framework_findings: list = field(default_factory=list)
    _adapter: object = None
    _baseline: object = None
    _path: str = ""

    # -- set up ---------------------------------------------------------------------------
    def adapter(self):
        """The framework's adapter on this store, prepared once per process."""
        if self._adapter is None:
            from adapters import storefactory
            from fuzz.targets import prepare_store, resolve, use_store

            self._path = storefactory.register(self.factory)
            adapter = resolve(FRAMEWORK_ALIASES.get(self.framework, self.framework))
            use_store(adapter, self._path)
            self._adapter = prepare_store(adapter)
        return self._adapter

    def variant_names(self) -> list[str]:
        """The suffixes of this store's variants (``graph-sync-head-update``...)."""
        names = [v.name for v in self.adapter().variants()]
        prefix = f"store-{self.adapter()._store.name}-"
        suffixes = [n[len(prefix):] if n.startswith(prefix) else n for n in names]
        if self.variants:
            unknown = sorted(set(self.variants) - set(suffixes))
            if unknown:
                raise ValueError(f"no variant {unknown[0]!r}; this store has: {', '.join(suffixes)}")
            return [s for s in suffixes if s in self.variants]
        return suffixes

    # -- the test -------------------------------------------------------------------------
    def check(self, variant: str) -> None:
        """Fuzz one variant under the active Hypothesis profile; raise ``StoreFailure``."""
        from hypothesis import HealthCheck, Phase, settings

        from fuzz.runner import Session, Settings

        adapter = self.adapter()
        full = f"store-{adapter._store.name}-{variant}"
        chosen = next((v for v in adapter.variants() if v.name in (full, variant)), None)
        if chosen is None:
            raise ValueError(f"no variant {variant!r}; this store has: "
                             f"{', '.join(self.variant_names())}")
        active = settings.default  # the profile the user's suite loaded
        run_settings = settings(
            active, deadline=None, suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False, print_blob=True,
            phases=[p for p in active.phases if p != Phase.explain])
        # Closed however the test ends: it removes the session's resumefuzz-* temp folder, which
        # would otherwise stay behind after every store test.
        with Session(adapter, chosen, settings=Settings(op_timeout=self.op_timeout)) as session:
            self._search(adapter, chosen, session, run_settings, active)

    def _search(self, adapter, chosen, session, run_settings, active) -> None:
        """Run the machine until it finds nothing, setting aside the framework's own findings;
        ``StoreFailure`` for the store's first."""
        from hypothesis import settings

        from fuzz.failures import Failure
        from fuzz.machine import machine_for
        from fuzz.profiles import KeyedDatabase, database_key

        suppressed: set = set()
        while True:
            machine = machine_for(session, suppress=frozenset(suppressed))
            keyed = run_settings
            if active.database is not None:  # each variant and suppression set its own entries
                keyed = settings(run_settings, database=KeyedDatabase(
                    active.database, database_key(adapter.name, chosen.name, suppressed)))
            try:
                failure = _run_once(machine, keyed)
            except Failure as exc:
                failure = exc
            if failure is None:
                return
            category = failure.divergence.category
            # Hypothesis could not reproduce it at once: a race or a background writer.
            timing = " (timing-dependent)" if getattr(failure, "timing", False) else ""
            trace, report_file, ownership = self._keep(adapter, chosen, failure)
            also = ownership.note if ownership and ownership.owner == "framework" else None
            if also or trace.finding.verdict == "D":
                why = (f"{also}: the framework's, not the store's" if also
                       else "a weakening the framework documents (verdict D)")
                self.framework_findings.append((chosen.name, category, str(report_file)))
                print(f"resumefuzz: [{chosen.name}] {category}{timing} set aside ({why}); "
                      f"report: {report_file}", file=sys.stderr)
                suppressed.add(category)
                continue
            entry = trace_path(trace, self.corpus_dir)
            # No script here: writing and checking one replays the trace several times over,
            # which a failing test should not pay for; `report --verify` does it on demand.
            raise StoreFailure(
                f"{category}{timing} ({trace.finding.property}) on {chosen.name}, "
                f"{len(trace.operations)} operations: {trace.finding.detail}\n"
                + (f"{trace.finding.note}\n" if trace.finding.note else "")
                + f"report: {report_file}\n"
                f"replay: resumefuzz replay {entry} --store {self._path}\n"
                f"no checked standalone script yet: resumefuzz report {entry} --store "
                f"{self._path} --verify 3 --reports {self.reports_dir} writes and checks one"
            ) from None

    def _keep(self, adapter, variant, failure):
        from fuzz import corpus, report

        trace = corpus.entry_from_failure(failure, adapter.name, variant.name, failure.workflow,
                                          dict(adapter.versions()))
        ownership = None
        if self.baseline:  # whose it is, as the command line's --store decides it
            from fuzz.baseline import Baseline

            if self._baseline is None:
                self._baseline = Baseline(adapter, self.op_timeout)
            trace, ownership = self._baseline.own(trace)
        path = corpus.save(trace, self.corpus_dir)
        return trace, report.write(trace, path, None, self.reports_dir), ownership

    # -- the unittest idiom ---------------------------------------------------------------
    @property
    def TestCase(self):  # noqa: N802 - Hypothesis's spelling (RuleBasedStateMachine.TestCase)
        """A ``unittest.TestCase`` with one ``test_<variant>`` method per variant."""
        import unittest

        owner = self

        def make(variant):
            def test(self):
                owner.check(variant)
            test.__name__ = "test_" + variant.replace("-", "_")
            test.__doc__ = f"resumefuzz: the store on variant {variant}"
            return test

        body = {"store_test": owner}
        for variant in self.variant_names():
            body["test_" + variant.replace("-", "_")] = make(variant)
        return type("StoreTestCase", (unittest.TestCase,), body)

    # -- the fixture idiom ----------------------------------------------------------------
    def fixture(self, scope: str = "module"):
        """A pytest fixture returning this ``StoreTest`` (call ``.check(variant)`` on it)."""
        import pytest

        @pytest.fixture(scope=scope)
        def resumefuzz_store():
            return self
        return resumefuzz_store


def _run_once(machine, run_settings):
    """Run the machine; the ``Failure`` it raised, or None.  A failure in a run Hypothesis called
    flaky (a race, a background writer: ``fuzz/internal/flaky.py``) is a timing-dependent
    finding, kept as the campaign keeps it (``fuzz/campaign.py``); flakiness with no failure
    behind it is raised as it is."""
    from hypothesis.errors import Flaky
    from hypothesis.stateful import run_state_machine_as_test

    from fuzz.internal.flaky import Best, kept_failure, watched

    best = Best()
    try:
        run_state_machine_as_test(watched(machine, best), settings=run_settings)
    except Flaky as exc:
        failure = kept_failure(exc, best)
        if failure is None:
            raise
        return failure
    return None


def trace_path(trace, root: Path) -> Path:
    from fuzz import corpus

    return corpus.entry_path(trace, root)


def store_test(framework: str, factory, *, variants=(), op_timeout: float = 60.0,
               reports_dir=".resumefuzz/reports", corpus_dir=".resumefuzz/corpus",
               baseline: bool = True) -> StoreTest:
    """The fuzz test of ``factory`` (``StoreContext -> store | StoreHandle``, or ``async def``)
    on ``framework`` (``"langgraph"``, ``"pydantic-graph"``, ``"crewai"``).

    ``variants``: suffixes to test (default: every variant of the store); ``baseline``: set
    aside, loudly, what the framework's own store shows too (``fuzz.baseline``)."""
    return StoreTest(framework=framework, factory=factory, variants=tuple(variants),
                     op_timeout=op_timeout, reports_dir=Path(reports_dir),
                     corpus_dir=Path(corpus_dir), baseline=baseline)
