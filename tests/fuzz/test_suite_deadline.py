"""The test suite's own deadline (tests/conftest.py): a test that never returns ends the run with
every thread's stack and status 1, instead of sitting until CI's budget runs out."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parent.parent / "conftest.py"

HANGS = '''
import threading

def test_that_never_returns():
    threading.Event().wait()

def test_never_reached():
    pass
'''


def _pytest(tmp_path, deadline: str):
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_hangs.py").write_text(HANGS)
    env = {**os.environ, "RESUMEFUZZ_TEST_DEADLINE": deadline}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "test_hangs.py"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_a_test_that_never_returns_ends_the_run_with_its_stack(tmp_path):
    done = _pytest(tmp_path, "2")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Timeout (0:00:02)!" in done.stderr
    assert "in test_that_never_returns" in done.stderr  # the stack names the test


@pytest.mark.parametrize("value", ["soon", "-1", "inf", "nan"])
def test_a_bad_deadline_is_a_one_line_usage_error(tmp_path, value):
    done = _pytest(tmp_path, value)
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error
    expected = f"RESUMEFUZZ_TEST_DEADLINE={value!r}: expected a finite number of seconds >= 0"
    assert expected in done.stderr
