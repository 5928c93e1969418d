"""The repro script runs on its own (AutoGen and the standard library only) and replays the ops."""

from __future__ import annotations

import re
import subprocess
import sys

from adapters.protocol import CrashAt, Fork, Query, Race, Recover, Resume, Start, Tamper, TwinRecover


def test_repro_script_is_standalone_and_replays(adapter, workflow, tmp_path):
    variant = next(v for v in adapter.variants() if v.name == "graphflow-split-step-sqlite")
    ops = [
        Start("t0", crash=CrashAt(1, "after_commit", "sigkill")),
        Recover("t0"),
        Query("t0"),
        Resume("t0", value="a", crash=CrashAt(3, "before_effect")),
        TwinRecover("t0"),
        Race("t0", values=("a", "b"), forced=True),
        Fork("t0", gate=2, value="b", new_thread="f1"),
        Tamper("t0", how="corrupt"),
        Resume("t0", value="b"),
    ]
    text = adapter.repro_script(variant, workflow, ops)
    imports = re.findall(r"^\s*(?:from|import)\s+([\w.]+)", text, flags=re.M)
    assert not {m.split(".")[0] for m in imports} & {"adapters", "refmodel", "fuzz", "resumefuzz"}
    path = tmp_path / "repro.py"
    path.write_text(text)
    done = subprocess.run([sys.executable, str(path)], cwd=tmp_path, env={"PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("\n[") == len(ops)
    assert "crashed (SIGKILL)" in out and "crashed (exception)" in out
    assert "EFFECT branch=t0 task=1 value=None" in out
    assert "EFFECT branch=f1 task=2 value=b" in out
    assert "recover on copy 2" in out
    assert "unreadable" in out  # the corrupt tamper reached the stored row
