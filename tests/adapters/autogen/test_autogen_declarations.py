"""What the AutoGen adapter declares, and that declaring it imports no framework."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from adapters.protocol import OPERATIONS

ROOT = Path(__file__).resolve().parents[3]


def test_importing_the_adapter_does_not_import_autogen():
    code = (
        "import sys, adapters.autogen as m; a = m.AutoGenAdapter(); a.variants(); "
        "[a.capabilities(v) for v in a.variants()]; [a.deviations(v) for v in a.variants()]; "
        "bad = [k for k in sys.modules if k.startswith(('autogen', 'pydantic'))]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)})


def test_environment_turns_tracing_off(adapter):
    env = adapter.environment()
    assert env["AUTOGEN_DISABLE_RUNTIME_TRACING"] == "true"
    assert env["OTEL_SDK_DISABLED"] == "true"


def test_versions_name_the_pinned_packages(adapter):
    versions = adapter.versions()
    assert versions["autogen-agentchat"] == "0.7.5"
    assert versions["autogen-core"] == "0.7.5"


def test_every_axis_combination_is_a_variant(adapter):
    names = {v.name for v in adapter.variants()}
    assert len(names) == 16
    for v in adapter.variants():
        o = v.options
        assert v.name == f"{o['team']}-{o['gate']}-{o['save']}-{o['store']}"
        assert (o["team"] == "swarm") == (o["gate"] == "handoff")


def test_json_store_declares_fork_not_expressible(adapter):
    for v in adapter.variants():
        caps = adapter.capabilities(v)
        assert caps.intents == {"resume": "indistinguishable", "fork": "indistinguishable"}
        assert "interrupt_identity" in caps.not_expressible
        if v.options["store"] == "json":
            assert "fork" not in caps.operations and caps.not_expressible["fork"]
        else:
            assert caps.operations == frozenset(OPERATIONS)


def test_corrupt_bytes_are_na_autogen_keeps_none(adapter):
    # save_state() returns a dict: the JSON text is the application's, so a corrupt tamper
    # could only be refused by the application's json.loads, never by AutoGen.
    for v in adapter.variants():
        caps = adapter.capabilities(v)
        assert caps.tamper_hows == {"invalid", "forged"}
        assert "load_state" in caps.not_expressible["tamper:corrupt"]


def test_deviations_cite_and_cover_only_hitl(adapter):
    # Every variant: the saved dict is the caller's (races, stale copies, forged dicts are a
    # caller-owned D, each with what the caller must add); hitl also loses a crashed run's work.
    caller = {"LostUpdate", "DoubleConsume", "InvalidPersist"}
    for v in adapter.variants():
        devs = adapter.deviations(v)
        assert all(d.owner == "caller" and d.remedy for d in devs)
        hitl = {d.category for d in devs if d.after_crash_kinds}
        assert {d.category for d in devs if not d.after_crash_kinds} == caller
        forged = next(d for d in devs if d.category == "InvalidPersist")
        assert forged.tamper_hows == {"forged"}  # an invalid dict is AutoGen's to refuse
        if v.options["save"] == "step":
            assert hitl == set()
        else:
            assert hitl == {"Replay", "StateMismatch", "DoubleConsume"}
            assert all("_base_group_chat.py:775" in d.citation for d in devs
                       if d.after_crash_kinds)
