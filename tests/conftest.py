"""Shared fixtures.  Tests mirror the package layout: tests/refmodel, tests/fuzz, tests/adapters."""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run in an empty directory, so corpus/ and shrink_reports/ land in tmp_path."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(autouse=True)
def _no_ci_profile_leak(monkeypatch):
    # The campaign always builds its own settings; tests pin the profile they mean.
    monkeypatch.delenv("RESUMEFUZZ_PROFILE", raising=False)
    yield


# -- never skip silently ----------------------------------------------------------------------
# An adapter's tox environment sets RESUMEFUZZ_NO_SKIP=1: there a missing framework, backend or
# service is a failure, not a skip (the lesson of langgraph PR #8537, whose SQLite conformance
# runner skipped itself on every run for months).  Elsewhere skips are counted, with reasons.


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get("RESUMEFUZZ_NO_SKIP") == "1":
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped where skipping is not allowed (RESUMEFUZZ_NO_SKIP=1): {reason}"


def pytest_terminal_summary(terminalreporter):
    skipped = terminalreporter.stats.get("skipped", [])
    if skipped:
        terminalreporter.write_line(
            f"resumefuzz: {len(skipped)} test(s) skipped in this environment (a framework, "
            "backend or service is missing here); each adapter's own tox environment runs them "
            "with skipping turned into failure: tox -e adapter-<framework>",
            yellow=True,
        )
