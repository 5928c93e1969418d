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
