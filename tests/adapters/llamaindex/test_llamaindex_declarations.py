"""Declarations: variants, n/a operations with reasons, deviations whose citations are checkable
against the installed sources, and no framework import at the adapter's import time."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

from adapters.llamaindex import variants
from adapters.protocol import OPERATIONS

ROOT = Path(__file__).resolve().parents[3]


def test_importing_the_adapter_imports_no_framework():
    code = ("import sys, adapters.llamaindex; "
            "bad = [m for m in sys.modules if m.split('.')[0] in "
            "('workflows', 'llama_agents', 'dbos', 'llama_index_instrumentation')]; "
            "print(bad); assert not bad")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True,
                   env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_variants_are_named_and_spell_out_their_axes(adapter):
    names = [v.name for v in adapter.variants()]
    assert len(names) == len(set(names)) >= 3
    for v in adapter.variants():
        assert {"backend", "gate", "resume"} <= set(v.options)
    assert {v.options["backend"] for v in adapter.variants()} == {"core", "server", "dbos"}


def test_fork_is_na_with_a_reason_where_not_expressible(adapter):
    for v in adapter.variants():
        caps = adapter.capabilities(v)
        # Every operation is expressible or n/a with a reason; the n/a list also names the
        # forged part LlamaIndex has no record of ("forged pending").
        ops = {k for k in caps.not_expressible if k in OPERATIONS}
        assert set(caps.operations) | ops == set(OPERATIONS)
        core = v.options["backend"] == "core"
        # Core's rows are the application's own JSON: corrupt bytes never reach LlamaIndex.
        assert set(caps.not_expressible) - ops == {"forged pending"} | (
            {"tamper:corrupt"} if core else set())
        assert ("corrupt" in caps.tamper_hows) is not core
        assert "pending" not in caps.forge_parts
        for op in caps.not_expressible:
            assert op not in caps.operations and len(caps.not_expressible[op]) > 40
        if v.options["backend"] == "core":
            assert caps.intents == {"resume": "indistinguishable", "fork": "indistinguishable"}
        else:
            assert "fork" in caps.not_expressible


def test_wait_for_event_deviation_cites_the_installed_docstring(adapter):
    assert metadata.version("llama-index-workflows") == variants.PINS["llama-index-workflows"]
    import workflows.context.context as ctx_module

    lines = Path(ctx_module.__file__).read_text().splitlines()
    cited = " ".join(line.strip() for line in lines[545:548])  # context.py:546-548
    assert "replays the entire step when the event arrives" in " ".join(cited.split())
    for v in adapter.variants():
        devs = [d for d in adapter.deviations(v) if d.category == "PrefixReplay"]
        if v.options["gate"] == "wait":
            assert len(devs) == 1
            assert "context.py:546-548" in devs[0].citation and "Unreachable" in devs[0].scope
        else:
            assert devs == []


def test_idle_snapshots_are_the_documented_hitl_pattern(adapter):
    """Core with snapshots at pauses only: what a crash inside a run loses is the caller's D,
    cited to the durable-workflows page ("This survives a restart, but not a crash during the
    run") and limited to crashed runs; no other variant declares it."""
    for v in adapter.variants():
        devs = [d for d in adapter.deviations(v) if d.category in ("Replay", "StateMismatch")
                and d.after_crash_kinds == frozenset({"exception", "sigkill"})]
        if v.options.get("snapshot") == "idle":
            assert sorted(d.category for d in devs) == ["Replay", "StateMismatch"]
            for d in devs:
                assert "not a crash during the run" in d.citation
                assert d.owner == "caller" and "snapshot as the run progresses" in d.remedy
        else:
            assert devs == []


def test_the_core_snapshot_is_the_callers_and_the_servers_store_is_llamaindexs(adapter):
    """Core: races, stale snapshots and tampered snapshots are the caller's (the docs have it
    store ``ctx.to_dict()``), each with a remedy; the server's own store stays LlamaIndex's."""
    for v in adapter.variants():
        owners = {d.category: d.owner for d in adapter.deviations(v)
                  if d.category in ("LostUpdate", "DoubleConsume", "InvalidPersist")}
        if v.options["backend"] == "core":
            assert owners == {"LostUpdate": "caller", "DoubleConsume": "caller",
                              "InvalidPersist": "caller"}
        else:
            assert set(owners.values()) <= {"framework"}


def test_private_server_variants_say_so(adapter):
    for v in adapter.variants():
        if v.options["backend"] != "server":
            continue
        private = v.options["api"] == "private"
        assert private == v.name.endswith("-private")
        assert ("PRIVATE" in v.description) == private
        assert (adapter.tuning(v).op_timeout is not None) == (not private)


def test_versions_report_the_pins(adapter):
    versions = adapter.versions()
    for dist, pin in variants.PINS.items():
        assert versions[dist] == pin
    pinned = (ROOT / "constraints" / "llamaindex.txt").read_text()
    for dist, pin in variants.PINS.items():
        assert f"{dist}=={pin}" in pinned
