"""Shared fixtures.  Tests mirror the package layout: tests/refmodel, tests/fuzz, tests/adapters."""

import faulthandler
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


# -- a hang is a failure with stacks, not a CI timeout ---------------------------------------------
# One test that never returned once ate the whole CI budget in silence (a CrewAI call, 75 minutes).
# Every test now runs under a deadline: faulthandler's watchdog, a C thread that needs no GIL,
# writes every thread's stack to the real stderr when it passes and ends the process (status 1).
# RESUMEFUZZ_TEST_DEADLINE sets it in seconds (0: none); the default is well above the slowest
# test (the corpus regression of an entry whose replays hang until the op timeout, repeatedly).

DEADLINE_ENV = "RESUMEFUZZ_TEST_DEADLINE"
DEFAULT_DEADLINE = 1500.0
_STDERR = pytest.StashKey[int]()


def deadline_seconds() -> float:
    raw = os.environ.get(DEADLINE_ENV, "")
    try:
        seconds = float(raw) if raw.strip() else DEFAULT_DEADLINE
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):  # also catches nan
        raise pytest.UsageError(
            f"{DEADLINE_ENV}={raw!r}: expected a finite number of seconds >= 0")
    return seconds


def pytest_configure(config):
    if deadline_seconds() and not float(config.getini("faulthandler_timeout") or 0):
        # Capture is suspended while plugins configure, so fd 2 is the real stderr here; a test's
        # capture replaces fd 2 with a temporary file that os._exit would throw away.
        config.stash[_STDERR] = os.dup(2)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    fd = item.config.stash.get(_STDERR, None)
    if fd is not None:
        faulthandler.dump_traceback_later(deadline_seconds(), exit=True, file=fd)
    try:
        yield
    finally:
        if fd is not None:
            faulthandler.cancel_dump_traceback_later()


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
