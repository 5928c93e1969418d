"""The standalone reproduction script replays a trace with the framework alone.

It must import no resumefuzz module and fire the same effects the adapter fired for the same ops.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from adapters.protocol import CrashAt, Fork, Query, Recover, Resume, Start, Tamper, Workflow

GATED = Workflow(3, {2}, ("a", "b"))
OPS = [
    Start("t0"),
    Resume("t0", value="a"),
    Fork("t0", gate=2, value="b", new_thread="f1"),
    Start("t1", crash=CrashAt(1, "in_flight")),
    Recover("t1"),
    Tamper("f1", how="forged"),
    Query("f1"),
]


def effects_of(output: str) -> list[tuple]:
    pattern = r"^effect branch=(\S+) task=(\d+) value=(\S+)$"
    return [(b, int(t), None if v == "None" else v)
            for b, t, v in re.findall(pattern, output, re.M)]


@pytest.mark.parametrize("name", ["file-classes-resume_docs-recover_initialize",
                                  "full-single-resume_ifp-recover_initialize"])
def test_repro_script_fires_what_the_adapter_fired(adapter, variant, harness, tmp_path, name):
    script = adapter.repro_script(variant(name), GATED, OPS)
    assert not re.search(r"^\s*(from|import) (adapters|fuzz|refmodel)\b", script, re.M)
    path = tmp_path / "repro.py"
    path.write_text(script)
    run = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]

    h = harness(name, GATED)
    expected = []
    for op in OPS:
        if op.executes:
            expected += h.do(op)[1]
        elif op.name == "tamper":
            h.case.tamper(op.thread, op.how)
    assert effects_of(run.stdout) == expected
    assert "crash exception at task 1 in_flight" in run.stdout


def test_repro_script_kills_a_child_at_a_sigkill_crash_point(adapter, variant, tmp_path):
    ops = [Start("t0", crash=CrashAt(1, "in_flight", "sigkill")), Recover("t0")]
    script = adapter.repro_script(variant("file-single-resume_ifp-recover_initialize"),
                                  Workflow(2, set()), ops)
    path = tmp_path / "repro.py"
    path.write_text(script)
    run = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert "outcome killed by signal 9" in run.stdout
    assert effects_of(run.stdout)[0] == ("t0", 1, None)
